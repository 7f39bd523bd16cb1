#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): issue 4's benchmark — for every anchor
# row of ../shared/GPU.md, the best synthesized config of a sweep of its family's space beside
# eager, torch.compile and the floor. Writes the table to $OUT_DIR/synth-sweep.md (rewritten
# after every row, so a cut-short run still leaves what it measured), torch.compile's times to
# torch-compile-times.json and every swept config's results to synth-sweep-details/<row>.tsv.
#
# Budget: about 6 minutes of GPU-machine time in all — torch.compile stops starting compiles
# after KFORGE_SWEEP_TORCH_BUDGET_S (default 75 s; mode default for every row first, then
# max-autotune-no-cudagraphs while time is left), the sweep stops compiling at its
# KFORGE_SWEEP_BUDGET_S (default 200 s) and sweeps at most KFORGE_SWEEP_MAX_CONFIGS valid
# configs per row (default 500: the prior's best interleaved with seeded random ones; the full
# spaces hold 1.1k–35k valid configs per row, far more than NVRTC compiles in minutes).
# KFORGE_SWEEP_ROWS=id,id picks rows (kforge-synth-sweep --help lists them).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
SWEEP=build/bin/kforge-synth-sweep
BUDGET=${KFORGE_SWEEP_BUDGET_S:-200}
TORCH_BUDGET=${KFORGE_SWEEP_TORCH_BUDGET_S:-75}
MAX_CONFIGS=${KFORGE_SWEEP_MAX_CONFIGS:-500}
row_args=()
[[ -n ${KFORGE_SWEEP_ROWS:-} ]] && row_args=(--rows "$KFORGE_SWEEP_ROWS")

if [[ ! -x $SWEEP ]]; then
  echo "$SWEEP is missing: build the kforge-synth-sweep target (tools/build) before tools/gpu-pack" |
    tee "$OUT_DIR/synth-sweep.md"
  exit 1
fi
"$SWEEP" "${row_args[@]}" --emit-rows "$OUT_DIR/synth-sweep-rows.json" || exit 1

# torch.compile first, alone on the GPU. Hard limit: its budget plus one slow last compile.
rm -f "$OUT_DIR/torch-compile-times.json"
timeout $((TORCH_BUDGET + 90)) python3 tools/bench/torch_compile_times.py \
  --rows-json "$OUT_DIR/synth-sweep-rows.json" --out "$OUT_DIR/torch-compile-times.json" \
  --time-budget-s "$TORCH_BUDGET" ||
  echo "torch_compile_times.py failed (exit $?): the table goes without torch.compile"
torch_args=()
[[ -s $OUT_DIR/torch-compile-times.json ]] && torch_args=(--torch-times "$OUT_DIR/torch-compile-times.json")

# The sweep. Hard limit: its budget plus the last rows' validation; the table file keeps every
# finished row if it is cut.
rm -f "$OUT_DIR/synth-sweep.md"
timeout $((BUDGET + 150)) "$SWEEP" "${row_args[@]}" --max-configs "$MAX_CONFIGS" \
  --time-budget-s "$BUDGET" "${torch_args[@]}" --out "$OUT_DIR/synth-sweep.md" \
  --details "$OUT_DIR/synth-sweep-details"
rc=$?
[[ $rc -eq 124 ]] && echo "kforge-synth-sweep hit its hard time limit; $OUT_DIR/synth-sweep.md holds the rows it finished"
[[ -s $OUT_DIR/synth-sweep.md ]] ||
  echo "kforge-synth-sweep exited with $rc before writing a table; its log is synth_sweep.txt" >"$OUT_DIR/synth-sweep.md"
exit $rc
