#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): one switch of a family's space judged
# on the same configs. A capped sweep of one row with the switch at its first value, then its
# fastest configs each beside its twin with the switch flipped (tools/bench/twin_configs.py),
# timed in one quick pass, then tools/bench/compare_sweeps.py --pair on them. Optionally
# Nsight Compute on the fastest config of each side (profile.sh).
#   KFORGE_AB_ROW=id                 the row (`kforge-synth-sweep --rows x` lists them)
#   KFORGE_AB_SWITCH=PARAM=A,B       the switch and its two values
#   KFORGE_AB_WHERE='name=value;...' more values every swept config has (optional)
#   KFORGE_AB_MAX_CONFIGS=N          configs of the first sweep (default 120)
#   KFORGE_AB_TOP=N                  twin pairs timed (default 20)
#   KFORGE_AB_PROFILE=1              also profile the fastest config of each side
# Writes OUT_DIR/switch-ab.md (both sweeps' tables and the comparison) and
# OUT_DIR/switch-ab-details.tgz (both --details directories).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
ROW=${KFORGE_AB_ROW:?set KFORGE_AB_ROW to a row id}
SWITCH=${KFORGE_AB_SWITCH:?set KFORGE_AB_SWITCH to PARAM=A,B}
param=${SWITCH%%=*}
values=${SWITCH#*=}
first=${values%%,*}
second=${values#*,}
where="$param=$first${KFORGE_AB_WHERE:+;$KFORGE_AB_WHERE}"
work=$(mktemp -d)
report=$OUT_DIR/switch-ab.md
SWEEP=build/bin/kforge-synth-sweep
{
  echo "# $ROW: $param=$first against $param=$second on the same configs"
  echo
  echo "First sweep: \`--where '$where' --max-configs ${KFORGE_AB_MAX_CONFIGS:-120} --quick-only\`"
  echo
} > "$report"
"$SWEEP" --rows "$ROW" --where "$where" --max-configs "${KFORGE_AB_MAX_CONFIGS:-120}" \
  --quick-only --details "$work/first" --out "$work/first.md" > "$work/first.log" 2>&1 ||
  { echo "switch_ab: the first sweep failed:"; tail -20 "$work/first.log"; } >> "$report"
cat "$work/first.md" >> "$report" 2> /dev/null
twin_args=("$work/first" "$ROW" "$SWITCH" --top "${KFORGE_AB_TOP:-20}")
[[ -n ${KFORGE_AB_WHERE:-} ]] && twin_args+=(--where "$KFORGE_AB_WHERE")
if configs=$(python3 tools/bench/twin_configs.py "${twin_args[@]}"); then
  "$SWEEP" --rows "$ROW" --configs "$configs" --quick-only --details "$work/twins" \
    --out "$work/twins.md" > "$work/twins.log" 2>&1 ||
    { echo "switch_ab: the twins' sweep failed:"; tail -20 "$work/twins.log"; } >> "$report"
  {
    echo
    echo "## Twins: the first sweep's fastest configs beside the same with $param=$second"
    echo
    cat "$work/twins.md" 2> /dev/null
    echo
    echo '```'
    python3 tools/bench/compare_sweeps.py "$work/twins" --pair "$SWITCH" 2>&1
    echo '```'
  } >> "$report"
  if [[ ${KFORGE_AB_PROFILE:-0} == 1 ]]; then
    best=()
    for v in "$first" "$second"; do
      best+=("$(python3 tools/bench/twin_configs.py "$work/twins" "$ROW" --top 1 \
        --where "$param=$v${KFORGE_AB_WHERE:+;$KFORGE_AB_WHERE}")")
    done
    KFORGE_PROFILE_ROW=$ROW KFORGE_PROFILE_CONFIGS="${best[0]}|${best[1]}" \
      KFORGE_PROFILE_LAUNCHES=${KFORGE_PROFILE_LAUNCHES:-2} bash tools/gpu-steps/profile.sh "$OUT_DIR"
  fi
else
  echo "switch_ab: no twins (twin_configs.py failed above)" >> "$report"
fi
tar -czf "$OUT_DIR/switch-ab-details.tgz" -C "$work" first twins first.log twins.log 2> /dev/null
cat "$report"
