#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): a kernel change judged on the same
# configs. Sweeps KFORGE_SWEEP_ROWS with synth_sweep.sh twice: with this build (torch.compile
# included) into a work dir's before/, then with the second build tools/gpu-pack carried to
# .carry/ab/bin (KFORGE_PACK_AB_BUILD; KFORGE_SWEEP_BIN) into after/, the same seeded configs and
# before's torch.compile times; writes OUT_DIR/synth-sweep-ab.md: tools/bench/compare_sweeps.py's
# config-by-config ratios (KFORGE_AB_BY=PARAM groups them, e.g. grid, so that a path the change
# did not touch shows as the control) and both tables. Both builds' details and logs go to
# OUT_DIR/synth-sweep-ab.tgz. KFORGE_SWEEP_MAX_CONFIGS (default 300) and KFORGE_SWEEP_BUDGET_S
# (default 80) apply to each sweep.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
source tools/gpu-steps/lib/second_build.sh
second_build_or_skip synth_sweep_ab "$OUT_DIR/synth-sweep-ab.md" || exit 0
[[ -n ${KFORGE_SWEEP_ROWS:-} ]] || { echo "synth_sweep_ab: set KFORGE_SWEEP_ROWS"; exit 2; }
export KFORGE_SWEEP_MODE=capped
export KFORGE_SWEEP_MAX_CONFIGS=${KFORGE_SWEEP_MAX_CONFIGS:-300}
export KFORGE_SWEEP_BUDGET_S=${KFORGE_SWEEP_BUDGET_S:-80}
WORK=$(mktemp -d)
bash tools/gpu-steps/synth_sweep.sh "$WORK/before" >"$WORK/before.log" 2>&1
echo "before (this build): exit $?"
# before's torch.compile times where it measured them (else after measures its own)
times=$WORK/before/torch-compile-times.json
[[ -s $times ]] || times=
KFORGE_SWEEP_BIN=$AB KFORGE_SWEEP_TORCH_TIMES=$times \
  bash tools/gpu-steps/synth_sweep.sh "$WORK/after" >"$WORK/after.log" 2>&1
echo "after (.carry/ab): exit $?"
by_args=()
[[ -n ${KFORGE_AB_BY:-} ]] && by_args=(--by "$KFORGE_AB_BY")
{
  echo "# Sweep A/B: this build (before) and .carry/ab (after), rows $KFORGE_SWEEP_ROWS"
  echo; echo "## Config by config (quick pass)"; echo
  python3 tools/bench/compare_sweeps.py "$WORK/before/synth-sweep-details" \
    "$WORK/after/synth-sweep-details" "${by_args[@]}" 2>&1
  echo; echo "## Before"; echo; cat "$WORK/before/synth-sweep.md" 2>/dev/null
  echo; echo "## After"; echo; cat "$WORK/after/synth-sweep.md" 2>/dev/null
} >"$OUT_DIR/synth-sweep-ab.md"
tar czf "$OUT_DIR/synth-sweep-ab.tgz" -C "$WORK" before/synth-sweep-details \
  after/synth-sweep-details before.log after.log 2>/dev/null
cat "$OUT_DIR/synth-sweep-ab.md"
