#!/usr/bin/env bash
# Session 50, call 2: the residual chain's write with its stashed values' first loads in flight
# while the row's partials merge (call2-ab/ordered-merge-overlap.patch, its sweep executables
# carried as .carry/ab/bin: KFORGE_PACK_AB_BUILD's layout) against main's build
# (.carry/build/bin): the seed and its two nearest configs of session 48's sweep, quick pass, 40
# repetitions, three rounds alternating the builds.
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-07-session50/call2-ab.sh $OUT
OUT=$1
mkdir -p /tmp/ab
row=res-gn-silu-vae-128x512-fp32
b="rows_per_block=1;vec=4;algo=welford;reg_cache=8;split_mode=ordered;fast_math=1;grid=oneshot"
c="row_threads=256;$b;cache=output;split=256;unroll=2;lag_scale=0.5"
c="$c|row_threads=512;$b;cache=output;split=128;unroll=2;lag_scale=0.5"
c="$c|row_threads=256;$b;cache=output;split=256;unroll=1;lag_scale=0.5"
for i in 1 2 3; do
  for v in main merge; do
    bin=.carry/build/bin/kforge-synth-sweep; [[ $v == merge ]] && bin=.carry/ab/bin/kforge-synth-sweep
    timeout 60 $bin --rows $row --configs "$c" --quick-only --reps 40 --details /tmp/ab/$v-$i \
      --out /tmp/ab/$v-$i.md > /tmp/ab/$v-$i-log.txt 2>&1 || tail -3 /tmp/ab/$v-$i-log.txt
  done
done
for f in /tmp/ab/*.md; do echo "== $f"; cat "$f"; done
tar czf $OUT/ab.tgz -C /tmp ab
