#!/usr/bin/env bash
# test (no GPU) of tools/bench/pack_sweep_details.sh: rows written by several shards and calls
# pack into one TSV per row, each config once (the shard's line first, as ReadFinishedDetails
# reads them), unfinished lines dropped, eager files kept; and a packed tarball resumes:
# kforge-synth-sweep --resume carries every config of the committed pooling row from it.
#   pack_sweep_details_test.sh KFORGE_SYNTH_SWEEP REPO_ROOT
set -uo pipefail
SWEEP=$1
ROOT=$2
PACK=$ROOT/tools/bench/pack_sweep_details.sh
source "$(dirname "$0")/test_lib.sh"
D=$DIR/details
mkdir -p "$D" "$DIR/unpacked"
H=$'config\tkernel\tcompile\tquick_verdict\tquick_us\treps\tpruned\tmax_normalized'
H+=$'\tfull_verdict\tfull_us\tmessage\tkernel_sha256'
line() { printf '%s\t0\tCOMPILE_OK\t%s\t%s\t5\t0\t0.1\t\t0\t\taa\n' "$1" "$2" "$3"; }
{ echo "$H"; line c=1 PASS 10; line c=2 PASS 20; line c=3 "" 0; } >"$D/a.tsv"
{ echo "$H"; line c=2 PASS 21; line c=4 MISMATCH 40; line c=5 SKIPPED 0; } >"$D/a.shard-0-of-2.tsv"
{ echo "$H"; line c=6 PASS 60; } >"$D/b.shard-1-of-2.tsv"
echo 12.5 >"$D/a.eager-us"
"$PACK" "$D" "$DIR/packed.tgz" "$DIR/work" || fail "pack failed"
tar xzf "$DIR/packed.tgz" -C "$DIR/unpacked" || fail "the tarball does not unpack"
U=$DIR/unpacked/synth-sweep-details
[[ $(ls "$U") == $'a.eager-us\na.tsv\nb.tsv' ]] ||
  fail "one TSV per row and the eager file expected, got: $(ls "$U")"
[[ $(head -1 "$U/a.tsv") == "$H" ]] || fail "a.tsv lost its header"
got=$(tail -n +2 "$U/a.tsv" | cut -f1,4,5 | sort | tr '\t\n' ' |')
[[ $got == "c=1 PASS 10|c=2 PASS 21|c=4 MISMATCH 40|" ]] ||
  fail "a.tsv must hold each finished config once, the shard's line first; got: $got"
[[ $(tail -n +2 "$U/b.tsv" | cut -f1) == "c=6" ]] || fail "b.tsv (shard files only) lost its line"
[[ $(cat "$U/a.eager-us") == 12.5 ]] || fail "the eager file changed"

# A real row through pack and --resume: nothing to sweep again.
ROW=avgpool-r50
mkdir -p "$DIR/real/synth-sweep-details" "$DIR/resumed"
tar xzf "$ROOT/docs/benchmarks/2026-12-01-exhaustive-sweep/synth-sweep-details.tgz" \
  -C "$DIR/real" "synth-sweep-details/$ROW.tsv" || fail "cannot unpack $ROW.tsv"
redigest "$SWEEP" $ROW "$DIR/real/synth-sweep-details/$ROW.tsv"
"$PACK" "$DIR/real/synth-sweep-details" "$DIR/real.tgz" "$DIR/work2" || fail "pack of $ROW failed"
tar xzf "$DIR/real.tgz" -C "$DIR/resumed" --strip-components=1 ||
  fail "$ROW's tarball does not unpack"
valid=$(($(wc -l <"$DIR/resumed/$ROW.tsv") - 1))
out=$("$SWEEP" --rows $ROW --resume --compile-only --jobs 1 --details "$DIR/resumed" 2>&1) ||
  fail "--resume from the packed row failed:"$'\n'"$out"
echo "$out" | grep -q "^$ROW: .* $valid carried from --details, 0 sources to compile" ||
  fail "all $valid configs carried expected:"$'\n'"$out"
echo "pack_sweep_details_test: all checks passed"
