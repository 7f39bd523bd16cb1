#!/usr/bin/env bash
# Session 47's next round, call 1 (docs/benchmarks/2026-12-06-session47.md, "Next GPU round"):
# the SD VAE model run alone, on the clean flush, for the torch.compile and end-to-end columns.
#   bash tools/gpu-pack; then, on the device:
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session47/next-round.sh $OUT
OUT=$1
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=5 \
  KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=60 timeout 545 \
  bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/x/optimize-results.tgz $OUT/
rm -rf $OUT/x
