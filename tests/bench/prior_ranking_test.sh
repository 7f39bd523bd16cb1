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
# The batch norm prior charges an occupancy cap's spills: on the b32 ResNet-50 rows of
# 2026-12-02-bn-pointers (call 1) its first pick ran within 1.10x of the fastest swept config
# (1.27x and 1.38x before it did).
tar xzf "$ROOT/docs/benchmarks/2026-12-02-bn-pointers/call1-synth-sweep-ab.tgz" -C "$DIR" ||
  fail "cannot unpack the batch norm sweep"
BN=$DIR/bn
mkdir -p "$BN" && cp "$DIR"/after/synth-sweep-details/bn-r50-32x*-fp32.tsv "$BN"/
"$SWEEP" --rows bn-r50-32x512x28-fp32,bn-r50-32x1024x14-fp32 --compile-only \
  --priors "$DIR/bn-priors.tsv" >"$DIR/log" 2>&1 || fail "--priors failed: $(tail -5 "$DIR/log")"
out=$(python3 "$ROOT/tools/bench/prior_ranking.py" "$DIR/bn-priors.tsv" "$BN") ||
  fail "prior_ranking.py failed: $out"
firsts=$(grep -o "prior's first [0-9.]*x" <<<"$out" | grep -o "[0-9.]*x" | tr -d x)
[[ $(wc -w <<<"$firsts") == 2 ]] || fail "two batch norm rows expected: $out"
for f in $firsts; do
  python3 -c "import sys; sys.exit(0 if $f <= 1.10 else 1)" ||
    fail "the batch norm prior's first pick ran ${f}x the fastest: $out"
done
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
