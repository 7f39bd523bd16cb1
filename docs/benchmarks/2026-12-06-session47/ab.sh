#!/usr/bin/env bash
# A/B by hand in the quick pass (each line: eager and kforge of one invocation, interleaved):
# 1. the L2 flush before each rep, dirty (the worker's memset) or clean (memset, then a read);
# 2. the ordered split's L2 prefetch of the next ticket's chunk (KFORGE_EXPERIMENT_ORDERED_PREFETCH).
OUT=$1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
b="rows_per_block=1;vec=4;algo=welford;reg_cache=8;split_mode=ordered;fast_math=1;grid=oneshot"
seed="row_threads=256;$b;cache=none;split=64;unroll=4;lag_scale=1"
res="row_threads=256;$b;cache=output;split=256;unroll=2;lag_scale=0.5"
one() {  # label row config flush prefetch
  local d=/tmp/ab-$1-$2; rm -rf $d
  if [[ $5 == 1 ]]; then export KFORGE_EXPERIMENT_ORDERED_PREFETCH=1; else unset KFORGE_EXPERIMENT_ORDERED_PREFETCH; fi
  timeout 90 .carry/build/bin/kforge-synth-sweep --rows $2 --configs "$3" --quick-only --reps 40 \
    --flush $4 --details $d > /tmp/log-ab.txt 2>&1 || tail -5 /tmp/log-ab.txt
  echo "$2 $1 (flush $4, prefetch $5): eager $(cat $d/*.eager-us) us, kforge $(tail -1 $d/*.tsv | cut -f5) us" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  for r in gn-silu-vae-256x256-fp32:$seed res-gn-silu-vae-128x512-fp32:$res; do
    row=${r%%:*}; cfg=${r#*:}
    one dirty $row "$cfg" dirty 0
    one clean $row "$cfg" clean 0
    one prefetch $row "$cfg" dirty 1
  done
done
