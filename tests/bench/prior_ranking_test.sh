#!/usr/bin/env bash
# integration test (no GPU) of tools/bench/prior_ranking.py: the priors kforge-synth-sweep
# --priors writes for the rows of a committed GPU sweep, ranked against that sweep's measured
# times (docs/benchmarks/2026-12-01-sweep-details), give one line per row; a directory without
# details, or a TSV that is not one, is an error that names it.
#   prior_ranking_test.sh KFORGE_SYNTH_SWEEP REPO_ROOT
set -uo pipefail
SWEEP=$1
ROOT=$2
DETAILS=$ROOT/docs/benchmarks/2026-12-01-sweep-details
source "$(dirname "$0")/test_lib.sh"
rows=$(cd "$DETAILS" && ls *.tsv | sed 's/\.tsv$//' | paste -sd, -)
"$SWEEP" --rows "$rows" --compile-only --priors "$DIR/priors.tsv" >"$DIR/log" 2>&1 ||
  fail "--priors failed: $(tail -5 "$DIR/log")"
out=$(python3 "$ROOT/tools/bench/prior_ranking.py" "$DIR/priors.tsv" "$DETAILS") ||
  fail "prior_ranking.py failed: $out"
want=$(ls "$DETAILS"/*.tsv | wc -l)
got=$(echo "$out" | grep -c "spearman=")
[[ $got -eq $want ]] || fail "$got ranked rows for $want details files:"$'\n'"$out"
mkdir "$DIR/empty" "$DIR/other"
out=$(python3 "$ROOT/tools/bench/prior_ranking.py" "$DIR/priors.tsv" "$DIR/empty" 2>&1) &&
  fail "a directory without details must fail"
echo "$out" | grep -q "no .tsv files in $DIR/empty" || fail "the error must name the directory: $out"
cp "$DIR/priors.tsv" "$DIR/other/"
out=$(python3 "$ROOT/tools/bench/prior_ranking.py" "$DIR/priors.tsv" "$DIR/other" 2>&1) &&
  fail "a TSV that is not a details file must fail"
echo "$out" | grep -q "priors.tsv is not a kforge-synth-sweep --details file" ||
  fail "the error must name the file: $out"
echo "prior_ranking_test: all checks passed"
