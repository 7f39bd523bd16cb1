#!/usr/bin/env bash
# integration test (no GPU) of kforge-synth-sweep --resume on the committed exhaustive sweep's
# pooling row (redigested: test_lib.sh): every config is carried; a finished line whose config
# string no longer exists still carries the configs that generate its kernel (results belong
# to kernels: a new parameter must not force a re-sweep); a line whose digest matches no
# kernel of the row is stale, and its config is swept again.
#   synth_sweep_resume_test.sh KFORGE_SYNTH_SWEEP REPO_ROOT
set -uo pipefail
SWEEP=$1
ROOT=$2
ROW=avgpool-r50
source "$(dirname "$0")/test_lib.sh"
tar xzf "$ROOT/docs/benchmarks/2026-12-01-exhaustive-sweep/synth-sweep-details.tgz" -C "$DIR" \
  "synth-sweep-details/$ROW.tsv" || fail "cannot unpack $ROW.tsv from the committed sweep"
D=$DIR/synth-sweep-details
redigest "$SWEEP" $ROW "$D/$ROW.tsv"
valid=$(($(wc -l <"$D/$ROW.tsv") - 1))
resume() { "$SWEEP" --rows $ROW --resume --compile-only --jobs 1 --details "$D" 2>&1; }

out=$(resume) || fail "--resume failed:"$'\n'"$out"
echo "$out" | grep -q "^$ROW: .* $valid carried from --details, 0 sources to compile" ||
  fail "all $valid configs carried expected:"$'\n'"$out"

# Rename line 2's config (as a new parameter would) and break line 3's digest.
awk -F'\t' 'BEGIN {OFS = "\t"} NR == 2 {$1 = "renamed=1;" $1} NR == 3 {$12 = "stale-" $12} 1' \
  "$D/$ROW.tsv" >"$DIR/t" && mv "$DIR/t" "$D/$ROW.tsv"
out=$(resume) || fail "--resume failed after the edits:"$'\n'"$out"
echo "$out" | grep -q "^$ROW: .* $((valid - 1)) carried from --details, 1 sources to compile" ||
  fail "the renamed line must still carry its kernel and only the broken digest be swept:"$'\n'"$out"
echo "$out" | grep -q "$ROW: 1 configs of --details swept again" ||
  fail "the line with another digest must be reported stale:"$'\n'"$out"
echo "synth_sweep_resume_test: all checks passed"
