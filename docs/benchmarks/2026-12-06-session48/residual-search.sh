#!/usr/bin/env bash
# Session 48's next round, short form (about 200 s): the SD VAE's residual chain (add -> div ->
# group_norm -> silu) searched alone, 50 iterations, with the ordered seed sized by the read's
# bytes and the prior counting the residual's re-reads (9e0358b). --ops aten::div --top 1: the
# div target with the most to gain, expected to be that chain (search.txt's first line names it).
# Not run: the session's device time ran out.
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session48/residual-search.sh $OUT
OUT=$1
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=1 \
  KFORGE_GPU_OPTIMIZE_OPS=aten::div KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=20 \
  timeout $((205 - SECONDS)) bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/ 2>/dev/null
rm -rf $OUT/x
