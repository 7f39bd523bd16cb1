#!/usr/bin/env bash
# Session 42's one-off: kernels of the row engine's ordered split, generated here by
#   kforge-synth-sweep --rows gn-vae-SHAPE-fp32 --configs C --compile-only --sources DIR
# and edited by hand (a KF_MIN_BLOCKS and its plan's grid; Welford's merge division), evaluated
# beside the hand-written ticket kernel of 2026-12-04 by `kforge eval` on the group norm
# targets captured on this GPU (the worker's timing method, validation included). Each
# SHAPE-NAME.cu in EXP_DIR with its SHAPE-NAME.json plan is evaluated once.
#   ordered-variants.sh EXP_DIR > table.md      (run by tools/gpu-check on the GPU machine)
set -uo pipefail
ROOT=$(pwd); EXP=$(realpath "$1"); KFORGE=$ROOT/build/bin/kforge
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cp docs/benchmarks/2026-12-04-session30/ticket-experiment/{gn_ticket.cu,gen.sh,plan.json,mk.py} "$W"/
cd "$W" || exit 1
python3 mk.py
declare -A target
for shape in 128x512 256x256 256x512; do
  "$KFORGE" capture gn$shape.pt --inputs in$shape.pt --device cuda --out cap$shape --top 5 --warmup 1 --iters 3 >cap-$shape.log 2>&1
  for d in cap$shape/targets/*; do
    python3 -c "import json,sys; t=json.load(open('$d/target.json')); sys.exit(not (len(t['nodes']) == 1 and t['nodes'][0]['op'] == 'aten::group_norm'))" && target[$shape]=$d
  done
done
source "$ROOT/tools/gpu-steps/lib/eval_row.sh"
ev() {  # SHAPE LABEL KERNEL PLAN
  eval_row "$KFORGE" "${target[$1]}" "$1" "$2" "$3" "$4"
}
echo "| shape | kernel | verdict | µs | % of floor |"
echo "| --- | --- | --- | ---: | ---: |"
bash gen.sh hand128 "VPT=8 LAG=4 KEEP=1 PREFETCH=1" 512 2
bash gen.sh hand256 "ROWLEN=524288 HW=65536 CPG=8 VPT=4 LAG=8 KEEP=1" 512 4
ev 128x512 "by hand: 512 threads x 2, 64 KB items, lag 4 rows" hand128.cu hand128.json
ev 256x256 "by hand: 512 threads x 4, 32 KB items, lag 8 rows" hand256.cu hand256.json
for f in "$EXP"/*.cu; do
  b=$(basename "$f" .cu)
  ev "${b%%-*}" "${b#*-}" "$f" "$EXP/$b.json"
done
