#!/usr/bin/env bash
# Session 46's next round (docs/benchmarks/2026-12-06-session46.md, "Next GPU round"), in one
# call: bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-06-session46/next-round.sh $OUT
# 1. The 2 MB rows' seed and eager in the quick pass after the worker's flush and after one that
#    leaves L2 clean (--flush). 2. Block shapes the VAE searches did not reach: the 2 MB rows and
#    the residual chain at 512 threads a block, splits and lags around the seeds.
OUT=$1
b="rows_per_block=1;vec=4;algo=welford;reg_cache=8;split_mode=ordered;fast_math=1;grid=oneshot"
seed="row_threads=256;$b;cache=none;split=64;unroll=4;lag_scale=1"
for f in dirty clean dirty clean; do
  timeout 120 .carry/build/bin/kforge-synth-sweep --rows gn-silu-vae-256x256-fp32 --configs "$seed" \
    --quick-only --reps 20 --flush $f --details /tmp/f-$f > /tmp/log-f.txt 2>&1 || tail -5 /tmp/log-f.txt
  echo "flush $f: eager $(cat /tmp/f-$f/*.eager-us) us, seed $(tail -1 /tmp/f-$f/*.tsv | cut -f5) us" | tee -a $OUT/flush.txt
done
sweep() {  # row configs
  timeout 200 .carry/build/bin/kforge-synth-sweep --rows "$1" --configs "$2" --top 4 --details /tmp/d-$1 --out $OUT/sweep-$1.md > /tmp/log-$1.txt 2>&1 || tail -5 /tmp/log-$1.txt
  grep "^| " $OUT/sweep-$1.md | tail -1
}
c=""
for s in 16 32 64 128; do for l in 0.5 1; do
  c="$c|row_threads=512;$b;cache=none;split=$s;unroll=4;lag_scale=$l"
done; done
c="$c|row_threads=512;$b;cache=none;split=32;unroll=2;lag_scale=1|row_threads=512;$b;cache=none;split=64;unroll=2;lag_scale=1"
sweep gn-silu-vae-256x256-fp32 "row_threads=256;$b;cache=none;split=64;unroll=4;lag_scale=1$c"
c=""
for s in 64 128 256; do for u in 1 2; do
  c="$c|row_threads=512;$b;cache=output;split=$s;unroll=$u;lag_scale=0.5"
done; done
sweep res-gn-silu-vae-128x512-fp32 "row_threads=256;$b;cache=output;split=256;unroll=2;lag_scale=0.5$c"
tar czf $OUT/sweep-details.tgz -C /tmp $(cd /tmp && ls -d d-* f-*) 2>/dev/null
