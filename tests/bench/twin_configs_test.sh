#!/usr/bin/env bash
# integration test (no GPU) of tools/bench/twin_configs.py on the committed group-norm sweep of
# docs/benchmarks/2026-12-02-h200-exact-tiling-and-bulk-copies.md (call 3): the fastest configs
# with a switch's first value, each beside its twin; without a switch the fastest alone; bad
# arguments named.
#   twin_configs_test.sh REPO_ROOT
set -uo pipefail
ROOT=$1
TWINS="python3 $ROOT/tools/bench/twin_configs.py"
source "$(dirname "$0")/test_lib.sh"
unpack_details "$ROOT/docs/benchmarks/2026-12-02-exact-tiling/call3-sweep-details.tgz"
base="row_threads=128;rows_per_block=2;vec=4;algo=welford;cache=none;reg_cache=8;split=64"
out=$($TWINS "$D" gn-vae-256x256-fp32 split_mode=sync,sync_keep --top 1 --where cache=none) ||
  fail "twins: $out"
want="$base;split_mode=sync;unroll=4;grid=oneshot|$base;split_mode=sync_keep;unroll=4;grid=oneshot"
[[ $out == "$want" ]] ||
  fail "the fastest cache=none sync config (66.72 µs) and its twin expected, got: $out"
out=$($TWINS "$D" gn-vae-256x256-fp32 split_mode=sync,sync_keep --top 5 --where cache=none)
[[ $(tr '|' '\n' <<<"$out" | grep -c "split_mode=sync_keep;") == 5 ]] ||
  fail "5 twins expected: $out"
# Without a switch: the fastest configs alone (two tie at 66.72 µs), to time again with another
# build.
out=$($TWINS "$D" gn-vae-256x256-fp32 --top 3) || fail "top configs: $out"
[[ $(tr '|' '\n' <<<"$out" | wc -l) == 3 && $out != *sync_keep* ]] ||
  fail "the 3 fastest configs, no twins, expected: $out"
tie="row_threads=128;rows_per_block=8;vec=4;algo=welford;cache=none;reg_cache=8;split=32"
[[ ${out%%|*} == "$base;split_mode=sync;unroll=4;grid=oneshot" ||
   ${out%%|*} == "$tie;split_mode=sync;unroll=2;grid=oneshot" ]] ||
  fail "a 66.72 µs config first expected: ${out%%|*}"
out=$($TWINS "$D" gn-x split_mode=sync,sync_keep 2>&1) && fail "an unknown row must be an error"
[[ $out == *"no details of row 'gn-x'"*"gn-vae-256x256-fp32"* ]] || fail "unknown row: $out"
out=$($TWINS "$D" gn-vae-256x256-fp32 split_mode 2>&1) && fail "a pair without values must fail"
[[ $out == *"is not PARAM=A,B"* ]] || fail "bad pair: $out"
out=$($TWINS "$D" gn-vae-256x256-fp32 split_mode=sync,sync_keep --where cache=regs 2>&1) &&
  fail "no matching config must be an error"
[[ $out == *"no passing config"*"cache=regs"* ]] || fail "no match: $out"
echo "twin_configs_test: all checks passed"
