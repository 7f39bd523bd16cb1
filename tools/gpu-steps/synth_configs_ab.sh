#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): a kernel change judged on the fastest
# configs of an earlier sweep, a few seconds a row where synth_sweep_ab.sh samples hundreds.
# Per row the KFORGE_AB_TOP fastest configs of KFORGE_AB_DETAILS (tools/bench/twin_configs.py)
# are timed in the quick pass by this build and by the second one tools/gpu-pack carried to
# .carry/ab/bin (KFORGE_PACK_AB_BUILD), KFORGE_AB_ROUNDS rounds that alternate which build goes
# first, so that drift shows as a difference between rounds. Writes
# OUT_DIR/synth-configs-ab.md (tools/bench/compare_sweeps.py per round: after = .carry/ab) and
# OUT_DIR/synth-configs-ab.tgz (every round's details and logs).
#   KFORGE_AB_ROWS=row,row        the rows (ids of kforge-synth-sweep --rows)
#   KFORGE_AB_DETAILS=DIR|TGZ     the earlier sweep: its synth-sweep-details/ or a tarball holding
#                                 one (e.g. a committed docs/benchmarks/*/...sweep-details.tgz)
#   KFORGE_AB_TOP=N               configs per row (default 20)
#   KFORGE_AB_WHERE='k=v;...'     only configs with these values
#   KFORGE_AB_ROUNDS=N            rounds (default 2)
#   KFORGE_AB_BY=PARAM            compare_sweeps.py --by PARAM (a path the change did not touch
#                                 then shows as the control)
#   KFORGE_AB_PAIR=PARAM=A,B      each config beside its twin with PARAM flipped (twin_configs.py;
#                                 both builds must know both values), and per round each
#                                 build's B / A too (compare_sweeps.py --pair)
#   KFORGE_AB_BEFORE_ENV='V=x ..' the "before" side runs with these variables set: a switch
#                                 judged within one build (e.g. KFORGE_EARLY_START=0); without
#                                 a second build both sides run this build
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=$(realpath -m "${1:-out/gpu-check}")
mkdir -p "$OUT_DIR"
source tools/gpu-steps/lib/second_build.sh
BEFORE_ENV=${KFORGE_AB_BEFORE_ENV:-}
if [[ -n $BEFORE_ENV && ! -x $AB ]]; then
  AB=build/bin/kforge-synth-sweep
  AFTER_NAME="this build"
else
  second_build_or_skip synth_configs_ab "$OUT_DIR/synth-configs-ab.md" || exit 0
  AFTER_NAME=".carry/ab"
fi
BEFORE_NAME="this build${BEFORE_ENV:+ with $BEFORE_ENV}"
ROWS=${KFORGE_AB_ROWS:-}
DETAILS=${KFORGE_AB_DETAILS:-}
if [[ -z $ROWS ]]; then
  # The second build may have travelled for synth_sweep_ab.sh instead.
  echo "synth_configs_ab: skipped (KFORGE_AB_ROWS not set)" | tee "$OUT_DIR/synth-configs-ab.md"
  exit 0
fi
if [[ -z $DETAILS ]]; then
  echo "synth_configs_ab: set KFORGE_AB_DETAILS, the sweep whose fastest configs to time"
  exit 2
fi
TOP=${KFORGE_AB_TOP:-20}
ROUNDS=${KFORGE_AB_ROUNDS:-2}
WORK=$(mktemp -d)
if [[ -f $DETAILS ]]; then
  mkdir -p "$WORK/from" && tar xzf "$DETAILS" -C "$WORK/from" ||
    { echo "synth_configs_ab: cannot unpack KFORGE_AB_DETAILS=$DETAILS"; exit 2; }
  DETAILS=$(dirname "$(find "$WORK/from" -name '*.tsv' | sort | head -1)")
fi
where=()
[[ -n ${KFORGE_AB_WHERE:-} ]] && where=(--where "$KFORGE_AB_WHERE")
declare -A configs=()
for row in ${ROWS//,/ }; do
  configs[$row]=$(python3 tools/bench/twin_configs.py "$DETAILS" "$row" \
    ${KFORGE_AB_PAIR:+"$KFORGE_AB_PAIR"} --top "$TOP" "${where[@]}") || exit 2
done
rc=0
for ((round = 1; round <= ROUNDS; round++)); do
  order=(main ab)
  ((round % 2 == 0)) && order=(ab main)
  for build in "${order[@]}"; do
    bin=build/bin/kforge-synth-sweep
    run_env=()
    [[ $build == ab ]] && bin=$AB
    # shellcheck disable=SC2206  # VAR=value words
    [[ $build == main && -n $BEFORE_ENV ]] && run_env=($BEFORE_ENV)
    for row in ${ROWS//,/ }; do
      env "${run_env[@]}" "$bin" --rows "$row" --quick-only --details "$WORK/$build-$round" \
        --configs "${configs[$row]}" >>"$WORK/$build-$round.log" 2>&1 || rc=1
    done
  done
done
by_args=()
[[ -n ${KFORGE_AB_BY:-} ]] && by_args=(--by "$KFORGE_AB_BY")
{
  echo "# Same configs: $BEFORE_NAME (before) and $AFTER_NAME (after), rows $ROWS"
  echo
  echo "The $TOP fastest configs per row of $KFORGE_AB_DETAILS" \
    "${KFORGE_AB_WHERE:+with $KFORGE_AB_WHERE }(quick pass)."
  for ((round = 1; round <= ROUNDS; round++)); do
    first="before"
    ((round % 2)) || first="after"
    echo; echo "## Round $round ($first first)"; echo
    python3 tools/bench/compare_sweeps.py "$WORK/main-$round" "$WORK/ab-$round" \
      "${by_args[@]}" 2>&1 || rc=1
    if [[ -n ${KFORGE_AB_PAIR:-} ]]; then
      for build in main ab; do
        side=before
        [[ $build == ab ]] && side=after
        echo; echo "### $side: ${KFORGE_AB_PAIR%%=*} twins"; echo
        python3 tools/bench/compare_sweeps.py "$WORK/$build-$round" --pair "$KFORGE_AB_PAIR" \
          2>&1 || rc=1
      done
    fi
  done
} >"$OUT_DIR/synth-configs-ab.md"
(cd "$WORK" && tar czf "$OUT_DIR/synth-configs-ab.tgz" main-* ab-* 2>/dev/null)
cat "$OUT_DIR/synth-configs-ab.md"
exit $rc
