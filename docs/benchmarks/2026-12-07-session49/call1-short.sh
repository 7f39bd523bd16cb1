#!/usr/bin/env bash
# Session 49, call 1 in short form (about 250 s), for a device whose time runs short after
# failed starts: the `gpu` tests of what changed since session 48's calls (the sweep's
# --quick-only line: synth_sweep_shards_test; the ordered seed sized by its read bytes:
# OrderedSplits), then session 48's residual-search.sh: the SD VAE's residual chain searched
# alone through optimize.sh (50 iterations, torch.compile and end-to-end columns).
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-07-session49/call1-short.sh $OUT
OUT=$1
timeout 80 ctest --test-dir build -L gpu --output-on-failure --timeout 75 \
  -R "synth_sweep_shards_test|OrderedSplits" 2>&1 | tee $OUT/ctest-gpu.txt | tail -5
bash docs/benchmarks/2026-12-06-session48/residual-search.sh $OUT
