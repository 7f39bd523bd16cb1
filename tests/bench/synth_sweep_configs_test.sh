#!/usr/bin/env bash
# integration test (no GPU) of kforge-synth-sweep --configs on the smallest anchor row: exactly
# the given configs are swept (two configs that differ only in `grid` share one source, so one
# compile), and a config outside the space fails the run with an error naming it; --sources
# writes a named model row's kernel with its config on the first line; --priors writes one
# prior per valid config, and names a path it cannot write; --where keeps only the configs
# with its values, and names a term that is not name=value.
#   synth_sweep_configs_test.sh KFORGE_SYNTH_SWEEP
set -uo pipefail
SWEEP=$1
ROW=avgpool-r50
fail() { echo "FAIL: $*"; exit 1; }
A="grid=stride;row_threads=4;rows_per_block=32;split=1;split_mode=scratch;unroll=1;vec=1"
B="grid=oneshot;row_threads=4;rows_per_block=32;split=1;split_mode=scratch;unroll=1;vec=1"

out=$("$SWEEP" --rows $ROW --configs "$A|$B" --compile-only --jobs 1 2>&1)
echo "$out" | grep -q "^$ROW: .* 2 to sweep, 2 distinct kernels, .* 1 sources to compile in 1 batches" ||
  fail "two configs, one shared source expected:"$'\n'"$out"
echo "$out" | grep -q "2 compiled" || fail "both configs compiled expected:"$'\n'"$out"

out=$("$SWEEP" --rows $ROW --configs "vec=3" --compile-only --jobs 1 2>&1) &&
  fail "a bad config must fail the run:"$'\n'"$out"
echo "$out" | grep -q "\-\-configs 'vec=3' is not a valid pooling config" ||
  fail "a bad config must be named:"$'\n'"$out"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
C="grid=stride;ilp=1;keep=0;occupancy=100;reuse=4;threads=64;vec=8"
out=$("$SWEEP" --rows mask-add-bf16 --configs "$C" --compile-only --jobs 1 --sources "$DIR" 2>&1) ||
  fail "the mask-add model row must compile:"$'\n'"$out"
CANONICAL="threads=64;vec=8;ilp=1;grid=stride;reuse=4;keep=0;occupancy=100"  # the space's order
[[ $(head -1 "$DIR/mask-add-bf16.0.cu") == "// $CANONICAL" ]] ||
  fail "--sources: no $DIR/mask-add-bf16.0.cu of $CANONICAL"
grep -q "#define KF_REUSE 4" "$DIR/mask-add-bf16.0.cu" || fail "--sources: the kernel is not the config's"
# occupancy=100 with 64 threads: 32 blocks resident, so registers are capped at 32.
grep -q "__launch_bounds__(KF_THREADS, 32)" "$DIR/mask-add-bf16.0.cu" ||
  fail "--sources: occupancy=100 did not ask for 32 resident blocks"
grep -q '"kf_elementwise"' "$DIR/mask-add-bf16.0.plan.json" || fail "--sources: no launch plan"
out=$("$SWEEP" --rows $ROW --compile-only --priors "$DIR/priors.tsv" 2>&1) || fail "--priors failed:"$'\n'"$out"
valid=$(echo "$out" | sed -n "s/^$ROW: [a-z_]*, \([0-9]*\) valid configs.*/\1/p")
[[ -n $valid && $(wc -l <"$DIR/priors.tsv") -eq $valid ]] || fail "--priors: not one line per valid config"
awk -F'\t' -v row=$ROW '$1 != row || $3 <= 0 { bad = 1 } END { exit bad }' "$DIR/priors.tsv" ||
  fail "--priors: a line is not row, config, positive microseconds"
out=$("$SWEEP" --rows $ROW --priors "$DIR/missing/priors.tsv" 2>&1) && fail "--priors into a missing dir must fail"
echo "$out" | grep -q "\-\-priors $DIR/missing/priors.tsv: cannot write" || fail "--priors must name the path: $out"
mkdir -p "$DIR/where"
out=$("$SWEEP" --rows $ROW --where "row_threads=4;grid=stride" --max-configs 0 --compile-only \
  --jobs 1 --sources "$DIR/where" 2>&1) || fail "--where failed:"$'\n'"$out"
swept=$(echo "$out" | sed -n "s/^$ROW: .* \([0-9]*\) to sweep.*/\1/p")
[[ -n $swept && $swept -gt 0 ]] || fail "--where: nothing to sweep:"$'\n'"$out"
[[ $(ls "$DIR/where"/*.cu | wc -l) -gt 0 ]] || fail "--where: no sources written"
if grep -L "^// .*row_threads=4;.*grid=stride" "$DIR/where"/*.cu | grep -q .; then
  fail "--where: a config without row_threads=4 and grid=stride was swept"
fi
out=$("$SWEEP" --rows $ROW --where "grid" --compile-only 2>&1) && fail "--where grid must fail"
echo "$out" | grep -q "\-\-where 'grid': 'grid' is not name=value" || fail "--where must name the term: $out"
echo "synth_sweep_configs_test: all checks passed"
