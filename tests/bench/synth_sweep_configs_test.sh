#!/usr/bin/env bash
# integration test (no GPU) of kforge-synth-sweep --configs on the smallest anchor row: exactly
# the given configs are swept (two configs that differ only in `grid` share one source, so one
# compile), and a config outside the space fails the run with an error naming it.
#   synth_sweep_configs_test.sh KFORGE_SYNTH_SWEEP
set -uo pipefail
SWEEP=$1
ROW=avgpool-r50
fail() { echo "FAIL: $*"; exit 1; }
A="grid=stride;row_threads=4;rows_per_block=32;split=1;split_mode=scratch;unroll=1;vec=4"
B="grid=oneshot;row_threads=4;rows_per_block=32;split=1;split_mode=scratch;unroll=1;vec=4"

out=$("$SWEEP" --rows $ROW --configs "$A|$B" --compile-only --jobs 1 2>&1)
echo "$out" | grep -q "^$ROW: .* 2 to sweep, 2 distinct kernels, .* 1 sources to compile in 1 batches" ||
  fail "two configs, one shared source expected:"$'\n'"$out"
echo "$out" | grep -q "2 compiled" || fail "both configs compiled expected:"$'\n'"$out"

out=$("$SWEEP" --rows $ROW --configs "vec=3" --compile-only --jobs 1 2>&1) &&
  fail "a bad config must fail the run:"$'\n'"$out"
echo "$out" | grep -q "\-\-configs 'vec=3' is not a valid pooling config" ||
  fail "a bad config must be named:"$'\n'"$out"
echo "synth_sweep_configs_test: all checks passed"
