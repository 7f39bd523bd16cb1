#!/usr/bin/env bash
# integration test (no GPU) of tools/bench/compare_sweeps.py on the committed sweeps of
# docs/benchmarks/2026-12-02-h200-exact-tiling-and-bulk-copies.md: it reproduces the figures that
# doc quotes (two builds on the same configs, a path and its control, a switch's two values),
# and a directory without details is an error that names it.
#   compare_sweeps_test.sh REPO_ROOT
set -uo pipefail
ROOT=$1
RAW=$ROOT/docs/benchmarks/2026-12-02-exact-tiling
COMPARE="python3 $ROOT/tools/bench/compare_sweeps.py"
source "$(dirname "$0")/test_lib.sh"
mkdir -p "$DIR/call1" "$DIR/call5"
tar xzf "$RAW/call1-sweep-details.tgz" -C "$DIR/call1" || fail "cannot unpack call 1's details"
tar xzf "$RAW/call5-sweep-details.tgz" -C "$DIR/call5" || fail "cannot unpack call 5's details"
expect() {  # $1: output, $2: a line it must hold
  grep -qF -- "$2" <<<"$1" || fail "expected the line '$2' in:"$'\n'"$1"
}

out=$($COMPARE "$DIR/call1/main/synth-sweep-details" "$DIR/call1/wip/synth-sweep-details") ||
  fail "two builds: $out"
expect "$out" "| bn-r50-1x128x28-fp32 | all | 300 | 1.0559 | 1.389 | 1.587 |"
expect "$out" "| bn-r50-1x1024x14-fp32 | all | 300 | 1.0614 | 1.531 | 1.741 |"

out=$($COMPARE "$DIR/call1/wip/synth-sweep-details" --pair stream=0,1) || fail "--pair: $out"
expect "$out" "| mul-scale-bf16 | 73 | 1.0156 | 36.000 | 36.576 |"

out=$($COMPARE "$DIR/call1/main/synth-sweep-details" "$DIR/call5/synth-sweep-details" --by grid) ||
  fail "--by: $out"
expect "$out" "| mul-scale-bf16 | grid=oneshot | 100 | 0.9945 | 35.808 | 35.904 |"
expect "$out" "| mul-scale-bf16 | grid=stride | 123 | 1.0016 |"

out=$($COMPARE "$DIR/none" "$DIR/call5/synth-sweep-details" 2>&1) &&
  fail "a directory without details must be an error"
expect "$out" "$DIR/none: no --details TSVs"
out=$($COMPARE "$DIR/call5/synth-sweep-details" 2>&1) &&
  fail "one directory without --pair must be an error"
expect "$out" "pass BEFORE_DIR AFTER_DIR"
echo "compare_sweeps_test: all checks passed"
