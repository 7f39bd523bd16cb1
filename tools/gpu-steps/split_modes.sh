#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): the row engine's split modes side by
# side on long rows. First the synth GPU tests that validate the waiting and streaming splits
# (ordered, sync, sync_keep, stream: full validation, held-out shapes, poisoned scratch), then
# per mode a capped sweep of that mode alone (synth_sweep.sh with split_mode=MODE), every mode
# against the same torch.compile times, measured once; then each mode's fastest kernel of the
# VAE rows beside the hand-written ticket-order kernel it is measured against
# (ticket_reference.sh; KFORGE_SPLIT_REFERENCE=0 skips it). Writes OUT_DIR/split-modes.md (the
# tests' summary and the tables) and OUT_DIR/split-modes.tgz (logs, details).
#   KFORGE_SPLIT_ROWS=row,row     anchor rows (default: the SD VAE decoder's three group norms)
#   KFORGE_SPLIT_MODES="m m"      split modes, in order (default "ordered stream")
#   KFORGE_SPLIT_MAX_CONFIGS=N    configs swept per row and mode (default 40)
#   KFORGE_SPLIT_BUDGET_S=S       compile budget per mode (default 70)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=$(realpath -m "${1:-out/gpu-check}")
RAW=$OUT_DIR/split-modes
mkdir -p "$RAW"
ROWS=${KFORGE_SPLIT_ROWS:-gn-vae-128x512-fp32,gn-vae-256x256-fp32,gn-vae-256x512-fp32}
MODES=${KFORGE_SPLIT_MODES:-ordered stream}
TABLE=$OUT_DIR/split-modes.md

build/bin/synth_gpu_tests \
  --gtest_filter='*OrderedSplits*:*SyncSplits*:*StreamSplits*' >"$RAW/synth-gpu-tests.txt" 2>&1
{
  echo "# Split modes on $ROWS"
  echo
  echo '```'
  grep -E '^\[ +(OK|FAILED|PASSED) +\]' "$RAW/synth-gpu-tests.txt" | sort -u
  echo '```'
} >"$TABLE"

torch_times=()
for mode in $MODES; do
  KFORGE_SWEEP_ROWS=$ROWS KFORGE_SWEEP_WHERE="split_mode=$mode" \
    KFORGE_SWEEP_MAX_CONFIGS=${KFORGE_SPLIT_MAX_CONFIGS:-40} \
    KFORGE_SWEEP_BUDGET_S=${KFORGE_SPLIT_BUDGET_S:-70} KFORGE_SWEEP_TORCH_BUDGET_S=45 \
    "${torch_times[@]}" bash tools/gpu-steps/synth_sweep.sh "$RAW/$mode" >"$RAW/$mode.log" 2>&1
  # The first mode's torch.compile times serve the rest (same rows, same machine).
  [[ -s $RAW/$mode/torch-compile-times.json && ${#torch_times[@]} -eq 0 ]] &&
    torch_times=(env "KFORGE_SWEEP_TORCH_TIMES=$RAW/$mode/torch-compile-times.json")
  { echo; echo "## split_mode=$mode"; echo; cat "$RAW/$mode/synth-sweep.md"; } >>"$TABLE"
done
if [[ ${KFORGE_SPLIT_REFERENCE:-1} == 1 ]]; then
  details=""
  for mode in $MODES; do details="$details $RAW/$mode/synth-sweep-details"; done
  KFORGE_TICKET_DETAILS=$details bash tools/gpu-steps/ticket_reference.sh "$RAW" >"$RAW/reference.log" 2>&1
  { echo; cat "$RAW/ticket-reference.md"; } >>"$TABLE"
fi
tar czf "$OUT_DIR/split-modes.tgz" -C "$OUT_DIR" split-modes
cat "$TABLE"
