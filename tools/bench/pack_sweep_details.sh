#!/usr/bin/env bash
# Packs a kforge-synth-sweep --details directory into the one file a later device call resumes
# from (synth_sweep.sh's KFORGE_SWEEP_RESUME_FROM) and a session commits: per row, one TSV of
# the finished lines of every shard and call that wrote it (a shard's file repeats the lines it
# carried, so the first line of each config wins, in the file order ReadFinishedDetails reads:
# shard files, then the row's own), and each row's eager µs (<row>.eager-us, for replays).
# Unfinished lines are left out: --resume sweeps them again anyway, and they were most of the
# bytes. The tarball is replaced whole, so a reader never sees half of one.
#   pack_sweep_details.sh DETAILS_DIR TARBALL WORK_DIR   (WORK_DIR: scratch of this packer's own)
set -euo pipefail
DETAILS=$1
TARBALL=$2
WORK=$3
finished=$WORK/synth-sweep-details
rm -rf "$finished" && mkdir -p "$finished"
shopt -s nullglob
declare -A rows=()
for f in "$DETAILS"/*.tsv; do
  row=$(basename "$f" .tsv)
  rows[${row%%.shard-*}]=1
done
for row in "${!rows[@]}"; do
  files=("$DETAILS/$row".shard-*.tsv)
  [[ -f $DETAILS/$row.tsv ]] && files+=("$DETAILS/$row.tsv")
  # Finished: the rule of IsFinalQuickVerdict (tools/bench/sweep_details.h).
  awk -F'\t' 'FNR == 1 { if (NR == 1) print; next }
    $4 != "" && $4 != "SKIPPED" && $4 != "NOT_EVALUATED" && !seen[$1]++' "${files[@]}" \
    >"$finished/$row.tsv"
done
eager=("$DETAILS"/*.eager-us)
((${#eager[@]} == 0)) || cp "${eager[@]}" "$finished"/
partial="$(dirname "$TARBALL")/.$(basename "$TARBALL").$(basename "$WORK")"
tar czf "$partial" -C "$WORK" synth-sweep-details
mv -f "$partial" "$TARBALL"
