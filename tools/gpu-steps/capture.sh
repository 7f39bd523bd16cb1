#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): exports the example models on the GPU
# and prints the capture overhead table (plain vs profiled forward, coverage) for each.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-out/gpu-check}
M=$OUT_DIR/capture-models
mkdir -p "$M"
python3 tools/kforge-export examples/resnet50.py:make --out "$M/resnet50" --batch 32 --device cuda
for m in qwen3 qwen3_moe gemma3; do
  python3 tools/kforge-export "examples/$m.py:make" --out "$M/$m" --seq 2048 --device cuda --dtype bfloat16
done
build/bin/kforge-bench-capture --device cuda "$M/resnet50" "$M/qwen3" "$M/qwen3_moe" "$M/gemma3"
build/bin/kforge capture "$M/resnet50/model.pt" --inputs "$M/resnet50/inputs.pt" --device cuda \
  --top 5 --out "$OUT_DIR/capture-resnet50" --rows 20
