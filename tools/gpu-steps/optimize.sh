#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): the whole user path on example models —
# `kforge optimize` (which exports the bundle into RUN/export), then tools/check-optimized
# comparing the optimized model with the original (outputs, fallback counters, end-to-end
# latency vs eager and torch.compile). Each model's summary and check table are printed and
# kept under OUT_DIR/optimize-<name>/.
#   KFORGE_GPU_MODELS="resnet50_b32 qwen3"   which models (default: all below)
#   KFORGE_GPU_OPTIMIZE_ITERATIONS=N         evaluations per target (default 30)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-out/gpu-check}
M=$OUT_DIR/optimize-models
ITERATIONS=${KFORGE_GPU_OPTIMIZE_ITERATIONS:-30}
mkdir -p "$M"
# name | factory | export/factory keyword arguments
MODELS=(
  "resnet50_b1|examples/resnet50.py:make|batch=1"
  "resnet50_b32|examples/resnet50.py:make|batch=32"
  "qwen3|examples/qwen3.py:make|seq=2048 dtype=bfloat16"
  "qwen3_moe|examples/qwen3_moe.py:make|seq=2048 dtype=bfloat16"
  "gemma3|examples/gemma3.py:make|seq=2048 dtype=bfloat16"
  "sd_vae|examples/sd_vae.py:make|size=512"
)
rc=0
for entry in "${MODELS[@]}"; do
  IFS='|' read -r name factory kwargs <<<"$entry"
  [[ -z ${KFORGE_GPU_MODELS:-} || " $KFORGE_GPU_MODELS " == *" $name "* ]] || continue
  kw=()
  for pair in $kwargs; do kw+=(--kw "$pair"); done
  run=$OUT_DIR/optimize-$name
  echo "== $name: export, optimize ($ITERATIONS iterations per target), check"
  python3 tools/kforge-export "$factory" --out "$M/$name" --device cuda "${kw[@]}" || { rc=1; continue; }
  build/bin/kforge optimize "$M/$name/model.pt" --inputs "$M/$name/inputs.pt" \
    --out "$run" --top 3 --iterations "$ITERATIONS" --seed 1 >"$run.log" 2>&1 || rc=1
  cat "$run/summary.txt" 2>/dev/null || tail -5 "$run.log"
  if [[ -f $run/export/manifest.json ]]; then
    python3 tools/check-optimized "$run/export" --device cuda --module "$factory" "${kw[@]}" \
      --runs 50 --lib build/lib/libkforge_runtime.so | tee "$run/check.txt"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
  else
    echo "$name: no bundle exported (no kernel beat eager, or the export failed: see $run.log)"
  fi
done
exit $rc
