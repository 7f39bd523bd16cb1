#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): the hand-written ticket-order group
# norm of 2026-12-04 (docs/benchmarks/2026-12-04-session30/ticket-experiment/) beside the row
# engine's kernels for the same shapes, all by `kforge eval` on targets captured on this GPU
# (the worker's timing method, validation included): how far the engine's split modes are from
# the kernel the ordered split follows. Writes OUT_DIR/ticket-reference.md.
#   KFORGE_TICKET_DETAILS="DIR ..."  sweeps' synth-sweep-details/ directories: each one's fastest
#                                   quick-pass PASS config of gn-vae-128x512-fp32 and
#                                   gn-vae-256x256-fp32 is evaluated too (split_modes.sh passes
#                                   one per split mode)
#   KFORGE_TICKET_DEVICE=cpu         capture on the CPU: a dry run of the script without a GPU
#                                   (every evaluation then says NOT_EVALUATED)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
OUT_DIR=$(realpath -m "${1:-out/gpu-check}")
mkdir -p "$OUT_DIR"
TABLE=$OUT_DIR/ticket-reference.md
KFORGE=$ROOT/build/bin/kforge
SWEEP=$ROOT/build/bin/kforge-synth-sweep
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cp docs/benchmarks/2026-12-04-session30/ticket-experiment/{gn_ticket.cu,gen.sh,plan.json,mk.py} "$W"/
cd "$W" || exit 1
python3 mk.py || { echo "mk.py failed" | tee "$TABLE"; exit 1; }

# The group norm target (one node) of each shape, captured on this GPU.
declare -A target
for shape in 128x512 256x256; do
  "$KFORGE" capture "gn$shape.pt" --inputs "in$shape.pt" --device "${KFORGE_TICKET_DEVICE:-cuda}" --out "cap$shape" --top 5 \
    --warmup 1 --iters 3 >"capture-$shape.log" 2>&1
  for d in "cap$shape"/targets/*; do
    if python3 -c "import json,sys; t=json.load(open('$d/target.json')); sys.exit(not (len(t['nodes']) == 1 and t['nodes'][0]['op'] == 'aten::group_norm'))"; then
      target[$shape]=$d
    fi
  done
  [[ -n ${target[$shape]:-} ]] || { echo "no group_norm target captured for $shape" | tee "$TABLE"; exit 1; }
done

{
  echo "# The ticket-order group norm by hand beside the engine's kernels (kforge eval)"
  echo
  echo "| shape | kernel | verdict | µs | % of floor |"
  echo "| --- | --- | --- | ---: | ---: |"
} >"$TABLE"
source "$ROOT/tools/gpu-steps/lib/eval_row.sh"
evaluate() {  # SHAPE LABEL KERNEL PLAN
  eval_row "$KFORGE" "${target[$1]}" "$1" "$2" "$3" "$4" >>"$TABLE"
}

# The hand-written kernel's fastest variants of 2026-12-04 per shape.
bash gen.sh hand128 "VPT=8 LAG=4 KEEP=1 PREFETCH=1" 512 2
bash gen.sh hand256 "ROWLEN=524288 HW=65536 CPG=8 VPT=4 LAG=8 KEEP=1" 512 4
evaluate 128x512 "by hand: 512 threads x 2, 64 KB items, lag 4 rows" hand128.cu hand128.json
evaluate 256x256 "by hand: 512 threads x 4, 32 KB items, lag 8 rows" hand256.cu hand256.json

# The engine's fastest configs of the given sweeps.
for details in ${KFORGE_TICKET_DETAILS:-}; do
  for shape in 128x512 256x256; do
    row=gn-vae-$shape-fp32
    [[ -s $details/$row.tsv ]] || continue
    config=$(awk -F'\t' 'NR > 1 && $4 == "PASS" && $5 != "" {print $5 "\t" $1}' "$details/$row.tsv" |
      sort -g | head -1 | cut -f2)
    [[ -n $config ]] || continue
    src=src-$(basename "$(dirname "$details")")-$shape
    "$SWEEP" --rows "$row" --configs "$config" --compile-only --sources "$src" >/dev/null 2>&1
    evaluate "$shape" "engine: $config" "$src/$row.0.cu" "$src/$row.0.plan.json"
  done
done
cat "$TABLE"
