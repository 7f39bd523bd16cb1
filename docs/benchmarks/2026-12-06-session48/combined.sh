#!/usr/bin/env bash
# Session 48, one call for what a scarce device must show first: the `gpu` tests of the code
# this round changed (cache=output's operand loads, the chain's one-element operands read
# once: the rowwise samples' attention chain holds one; the evaluator on the clean flush),
# then the SD VAE model run (optimize.sh, top 5, 50 iterations) with its torch.compile and
# end-to-end columns, which session 47's call lost to the limit.
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session48/combined.sh $OUT
OUT=$1
timeout 95 ctest --test-dir build -L gpu --output-on-failure --timeout 90 \
  -R "OutputStash|OrderedSplits|SampledConfigsPassFullValidation/rowwise_FLOAT32|GpuEvaluationTest.(CorrectGroupNorm|TwoEvaluations)" \
  2>&1 | tee $OUT/ctest-gpu.txt | tail -5
KFORGE_GPU_WORK_DIR=/tmp/o KFORGE_GPU_PAPER=0 KFORGE_GPU_MODELS=sd_vae KFORGE_GPU_OPTIMIZE_TOP=5 \
  KFORGE_GPU_OPTIMIZE_ITERATIONS=50 KFORGE_GPU_TORCH_BUDGET_S=45 timeout $((570 - SECONDS)) \
  bash tools/gpu-steps/optimize.sh $OUT/x
cp /tmp/o/optimize-sd_vae/search.txt $OUT/x/optimize-tables.md $OUT/x/optimize-results.tgz $OUT/
cp $OUT/x/*.txt $OUT/ 2>/dev/null
rm -rf $OUT/x
