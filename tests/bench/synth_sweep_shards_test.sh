#!/usr/bin/env bash
# gpu test of kforge-synth-sweep's exhaustive mode on the smallest anchor row (avgpool-r50,
# ~1.1k configs): two --shard runs (8 configs per NVRTC program, their quick pass on the GPU)
# must together cover every valid config exactly once, each table naming its fastest, a
# --resume run must carry all of its shard and compile nothing, and --finish must validate a
# winner and report full coverage.
#   synth_sweep_shards_test.sh KFORGE_SYNTH_SWEEP
set -uo pipefail
SWEEP=$1
ROW=avgpool-r50
DIR=$(mktemp -d /tmp/kforge-sweep-shards-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

valid=$("$SWEEP" --rows $ROW --compile-only --max-configs 1 2>&1 | sed -n "s/^$ROW: .*, \([0-9]*\) valid configs.*/\1/p")
[[ $valid -gt 100 ]] || fail "could not read the row's valid config count (got '$valid')"
for i in 0 1; do
  "$SWEEP" --rows $ROW --shard $i/2 --quick-only --batch 8 --details "$DIR/d" >"$DIR/s$i.txt" 2>&1 ||
    { tail -30 "$DIR/s$i.txt"; fail "shard $i/2 exited with $?"; }
done
lines() { tail -n +2 "$DIR/d/$ROW.shard-$1-of-2.tsv"; }
n0=$(lines 0 | wc -l)
n1=$(lines 1 | wc -l)
[[ $((n0 + n1)) -eq $valid ]] || fail "shards cover $n0 + $n1 configs, the row has $valid"
dups=$( (lines 0; lines 1) | cut -f1 | sort | uniq -d | wc -l)
[[ $dups -eq 0 ]] || fail "$dups configs are in both shards"
unfinished=$( (lines 0; lines 1) | cut -f4 | grep -cE '^(|SKIPPED|NOT_EVALUATED)$')
[[ $unfinished -eq 0 ]] || fail "$unfinished configs have no quick result"
# A --quick-only table reports its fastest quick-pass config (a run without --details has no
# other record of what it measured).
grep -q "fastest in the quick pass [0-9.]* µs, eager [0-9.]* µs: [a-z_]*=" "$DIR/s0.txt" ||
  { grep "^| " "$DIR/s0.txt"; fail "the --quick-only table names no fastest config"; }
pass=$( (lines 0; lines 1) | cut -f4 | grep -c '^PASS$')
[[ $pass -gt $((valid / 2)) ]] || fail "only $pass of $valid configs passed the quick pass (batched cubins broken?)"

"$SWEEP" --rows $ROW --shard 0/2 --resume --quick-only --details "$DIR/d" >"$DIR/r0.txt" 2>&1 ||
  fail "the --resume run exited with $?"
grep -q "$n0 carried from --details, 0 sources to compile" "$DIR/r0.txt" ||
  { grep "$ROW:" "$DIR/r0.txt"; fail "--resume did not carry all $n0 configs of shard 0"; }

"$SWEEP" --rows $ROW --finish --details "$DIR/d" --out "$DIR/table.md" >"$DIR/f.txt" 2>&1 ||
  { tail -30 "$DIR/f.txt"; fail "--finish exited with $?"; }
grep -q "| $valid | $valid | " "$DIR/table.md" ||
  { cat "$DIR/table.md"; fail "the table does not show $valid of $valid configs swept"; }
grep -q "CI " "$DIR/table.md" || { cat "$DIR/table.md"; fail "no config passed full validation"; }
echo "ok: $valid configs in 2 shards ($n0 + $n1), $pass passed the quick pass, resumed and finished"
