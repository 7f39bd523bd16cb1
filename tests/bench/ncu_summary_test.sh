#!/usr/bin/env bash
# integration test (no GPU) of tools/bench/ncu_summary.py on the Nsight Compute reports of
# docs/benchmarks/2026-12-02-h200-v4-stores-and-profiles.md (call 1): kforge's configs and
# torch.compile's kernels (NVTX ranges) in one table with the numbers the doc quotes; a report
# without a profiled kernel named, the others still summarized.
#   ncu_summary_test.sh REPO_ROOT
set -uo pipefail
ROOT=$1
SUMMARY="python3 $ROOT/tools/bench/ncu_summary.py"
source "$(dirname "$0")/test_lib.sh"
tar xzf "$ROOT/docs/benchmarks/2026-12-02-profiles/call1-ncu-gn-mul.tgz" -C "$DIR" ||
  fail "cannot unpack the committed reports"
G=$DIR/gn/profile-gn-vae-128x512-fp32
out=$($SUMMARY "$G-1.txt" "$G-torch.txt") || fail "summary: $out"
row() { grep -F "$1" <<<"$out" | grep -F "$2" | head -1; }
line=$(row '`kf_rows_finish`' 'split_mode=scratch;unroll=4;grid=stride')
[[ $line == *"| 4x128 x 256 | 70.62 | 72.6 | 60 | 46.0 | 37.9 |"* ]] ||
  fail "the scratch winner's finishing launch (70.62 us, 60 registers) expected: $line"
line=$(row '`triton_poi_fused_native_group_norm_2`' 'gn-vae-128x512-fp32/compiled/default')
[[ $line == *"| 32768 x 128 | 61.66 | 82.3 | 28 | 86.6 | 95.1 |"* ]] ||
  fail "Inductor's output pass under its NVTX range (61.66 us) expected: $line"
[[ $(grep -c '^| profile-' <<<"$out") == 13 ]] ||
  fail "4 kforge launches and 9 of eager and torch.compile expected: $out"
echo "== a config ncu could not profile" >"$DIR/empty.txt"
out=$($SUMMARY "$DIR/mul/profile-mul-scale-bf16-1.txt" "$DIR/empty.txt") &&
  fail "a report without a kernel must make the exit status 1"
[[ $out == *"kf_elementwise"*"| 31.84 |"*"no profiled kernel in $DIR/empty.txt"* ]] ||
  fail "the good report summarized and the empty one named expected: $out"
echo "ncu_summary_test: all checks passed"
