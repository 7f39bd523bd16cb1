#!/usr/bin/env bash
# integration test (no GPU) of kforge-bench-search --replay on the committed exhaustive sweep
# (docs/benchmarks/2026-12-01-exhaustive-sweep): a complete row is searched by both methods
# from its recorded times, the same seed gives the same table, the percent of the sweep's best
# never exceeds 100, and a row the sweep covers only in part is refused with its coverage.
#   search_replay_test.sh KFORGE_BENCH_SEARCH REPO_ROOT
set -uo pipefail
BENCH=$1
ROOT=$2
source "$(dirname "$0")/test_lib.sh"
unpack_details "$ROOT/docs/benchmarks/2026-12-01-exhaustive-sweep/synth-sweep-details.tgz"
run() { "$BENCH" --replay "$D" --rows avgpool-r50 --evaluations 20 --seeds 2 2>"$DIR/log"; }
one=$(run) || fail "--replay failed: $(tail -5 "$DIR/log")"
two=$(run) || fail "--replay failed the second time"
[[ $one == "$two" ]] || fail "the same seeds gave different tables"
echo "$one" | grep -q "the sweep's best" || fail "no sweep's best in the notes:"$'\n'"$one"
for m in "MCTS (synth proposer)" "random sampling"; do
  line=$(echo "$one" | grep -F "| $m |" | head -1)
  [[ -n $line ]] || fail "no row for $m:"$'\n'"$one"
  pcts=$(echo "$line" | grep -o '([0-9]*%)' | tr -d '(%)')
  [[ -n $pcts ]] || fail "no percent of the sweep's best for $m: $line"
  for p in $pcts; do ((p <= 100)) || fail "$m reached $p% of the sweep's best: $line"; done
done
# The same row with ten configs never swept.
P=$DIR/partial
mkdir -p "$P" && cp "$D/avgpool-r50.eager-us" "$P"/
head -n -10 "$D/avgpool-r50.tsv" >"$P/avgpool-r50.tsv"
out=$("$BENCH" --replay "$P" --rows avgpool-r50 --evaluations 5 2>&1)
swept=$(($(wc -l <"$D/avgpool-r50.tsv") - 11))
echo "$out" | grep -q "covers $swept of the row's [0-9]* valid configs" ||
  fail "a partly swept row must be refused with its coverage:"$'\n'"$out"
out=$("$BENCH" --replay "$DIR/nonexistent" --rows avgpool-r50 2>&1) &&
  fail "a missing --replay directory must fail"
echo "search_replay_test: all checks passed"
