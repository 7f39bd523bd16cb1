#!/usr/bin/env bash
# Session 48, call 1: the `gpu` tests the clean flush, KfStashRead and the chain's one-element
# operands read once touch (the evaluator's timings, the splits, cache=output, the rowwise and
# group_norm samples: their chains hold such operands), then the residual chain's seed A/B:
# .carry/build/bin/old-sweep is kforge-synth-sweep at f49ed35 (beside kforge-nvrtc, which it runs) (KfStashRead, the divisor read with every
# vector), the build's at this session's change (read once per row); quick pass, interleaved
# with eager, alternating, two invocations each; Nsight Compute on the new seed (DRAM bytes
# against the floor's 384 MB); then configs around the seed on the new one.
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session48/call1.sh $OUT
OUT=$1
timeout 200 ctest --test-dir build -L gpu --output-on-failure --timeout 190 \
  -R "GpuEvaluationTest|OrderedSplits|OutputStash|StreamSplits|SampledConfigsPassFullValidation/(rowwise|group_norm)" \
  2>&1 | tee $OUT/ctest-gpu.txt | tail -5
b="rows_per_block=1;vec=4;algo=welford;reg_cache=8;split_mode=ordered;fast_math=1;grid=oneshot"
seed="row_threads=256;$b;cache=output;split=256;unroll=2;lag_scale=0.5"
row=res-gn-silu-vae-128x512-fp32
for i in 1 2; do
  for v in old new; do
    bin=.carry/build/bin/kforge-synth-sweep; [[ $v == old ]] && bin=.carry/build/bin/old-sweep
    timeout 60 $bin --rows $row --configs "$seed" --quick-only --reps 40 --out $OUT/ab-$v-$i.md \
      > $OUT/ab-$v-$i-log.txt 2>&1 || tail -3 $OUT/ab-$v-$i-log.txt
  done
done
KFORGE_PROFILE_ROW=$row KFORGE_PROFILE_CONFIGS="$seed" KFORGE_PROFILE_LAUNCHES=2 timeout 90 \
  bash tools/gpu-steps/profile.sh $OUT > $OUT/profile-log.txt 2>&1 || tail -5 $OUT/profile-log.txt
c=$seed
for s in 128 256; do for u in 1 2; do
  c="$c|row_threads=512;$b;cache=output;split=$s;unroll=$u;lag_scale=0.5"
done; done
for s in 128 256; do for u in 1 4; do
  c="$c|row_threads=256;$b;cache=output;split=$s;unroll=$u;lag_scale=0.5"
done; done
timeout 130 .carry/build/bin/kforge-synth-sweep --rows $row --configs "$c" \
  --top 3 --details /tmp/d-res --out $OUT/sweep-res.md > $OUT/sweep-res-log.txt 2>&1 || tail -5 $OUT/sweep-res-log.txt
tar czf $OUT/sweep-details.tgz -C /tmp d-res
