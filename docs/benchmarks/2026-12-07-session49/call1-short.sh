#!/usr/bin/env bash
# Session 49, call 1 in short form (at most LIMIT s, default 360), for a device whose time runs
# short after failed starts: the SD VAE's residual chain searched alone through optimize.sh
# (session 48's residual-search.sh with more time: 50 iterations, torch.compile and end-to-end
# columns), then, in what time is left, the `gpu` tests of what changed since session 48's calls
# (the sweep's --quick-only line: synth_sweep_shards_test; the ordered seed sized by its read
# bytes: OrderedSplits).
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-07-session49/call1-short.sh $OUT [LIMIT]
OUT=$1
LIMIT=${2:-360}  # seconds this script may take; the search gets all but the last 60
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=1 \
  KFORGE_GPU_OPTIMIZE_OPS=aten::div KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=20 \
  timeout $((LIMIT - 60 - SECONDS)) bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/x/optimize-results.tgz $OUT/
cp $OUT/x/*.txt $OUT/ 2>/dev/null
rm -rf $OUT/x
timeout $((LIMIT - 5 - SECONDS)) ctest --test-dir build -L gpu --output-on-failure --timeout 75 \
  -R "OrderedSplits|synth_sweep_shards_test" 2>&1 | tee $OUT/ctest-gpu.txt | tail -5
