#!/usr/bin/env bash
# SD VAE model run (worker and torch.compile timed after a clean L2 flush); $2=1 with the
# ordered split's prefetch experiment on.
OUT=$1
[[ ${2:-0} == 1 ]] && export KFORGE_EXPERIMENT_ORDERED_PREFETCH=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=5 \
  KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=60 timeout 545 bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/x/optimize-results.tgz $OUT/ 2>/dev/null
rm -rf $OUT/x
