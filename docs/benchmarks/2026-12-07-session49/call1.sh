#!/usr/bin/env bash
# Session 49, call 1: the `gpu` tests of what changed since session 48's calls (the sweep's
# --quick-only line: synth_sweep_shards_test; the ordered seed sized by its read bytes:
# OrderedSplits), then the SD VAE model run (optimize.sh, top 5, 50 iterations) with its
# torch.compile and end-to-end columns: the residual chain's search now starts from the seed
# measured at 188.85 us (71% of its floor) in session 48.
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-07-session49/call1.sh $OUT
OUT=$1
timeout 80 ctest --test-dir build -L gpu --output-on-failure --timeout 75 \
  -R "synth_sweep_shards_test|OrderedSplits" 2>&1 | tee $OUT/ctest-gpu.txt | tail -5
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=5 \
  KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=45 timeout $((585 - SECONDS)) \
  bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/x/optimize-results.tgz $OUT/
cp $OUT/x/*.txt $OUT/ 2>/dev/null
rm -rf $OUT/x
