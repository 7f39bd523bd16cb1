#!/usr/bin/env bash
# Session 47's next round, call 2: the `gpu` label on the clean flush, then the residual chain
# with its operands loaded beside its input (KfStashRead: the seed measured 197.5 us in session
# 47's quick pass before it), at 256 and 512 threads a block around its seed (the quick pass,
# top 4 through full validation), and Nsight Compute on its seed (DRAM bytes against the
# floor's 384 MB, stalls).
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session47/next-round-2.sh $OUT
OUT=$1
ctest --test-dir build -L gpu --output-on-failure --timeout 600 2>&1 | tee $OUT/ctest-gpu.txt | tail -5
b="rows_per_block=1;vec=4;algo=welford;reg_cache=8;split_mode=ordered;fast_math=1;grid=oneshot"
seed="row_threads=256;$b;cache=output;split=256;unroll=2;lag_scale=0.5"
c=$seed
for s in 64 128 256; do for u in 1 2; do for l in 0.5 1; do
  c="$c|row_threads=512;$b;cache=output;split=$s;unroll=$u;lag_scale=$l"
done; done; done
for s in 128 256; do for u in 1 2 4; do
  [[ $s == 256 && $u == 2 ]] || c="$c|row_threads=256;$b;cache=output;split=$s;unroll=$u;lag_scale=0.5"
done; done
timeout 240 .carry/build/bin/kforge-synth-sweep --rows res-gn-silu-vae-128x512-fp32 --configs "$c" \
  --top 4 --details /tmp/d-res --out $OUT/sweep-res.md > $OUT/sweep-res-log.txt 2>&1 || tail -5 $OUT/sweep-res-log.txt
tar czf $OUT/sweep-details.tgz -C /tmp d-res
KFORGE_PROFILE_ROW=res-gn-silu-vae-128x512-fp32 KFORGE_PROFILE_CONFIGS="$seed" timeout 150 \
  bash tools/gpu-steps/profile.sh $OUT > $OUT/profile-log.txt 2>&1 || tail -5 $OUT/profile-log.txt
