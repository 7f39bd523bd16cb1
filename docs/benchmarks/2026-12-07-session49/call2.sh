#!/usr/bin/env bash
# Session 49, call 2: the whole `gpu` label on this session's build, six tests at a time (the
# label's correctness tests; none of it is timed against a target).
#   bash tools/gpu-check $OUT -- bash docs/benchmarks/2026-12-07-session49/call2.sh $OUT
OUT=$1
timeout 585 ctest --test-dir build -L gpu -j6 --output-on-failure --timeout 560 \
  2>&1 | tee $OUT/ctest-gpu.txt | tail -25
