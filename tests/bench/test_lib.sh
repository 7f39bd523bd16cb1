# Sourced by the bench tools' shell tests: fail, a scratch directory ($DIR) removed at exit,
# unpack_details TGZ, which unpacks a committed sweep's tarball into $DIR and sets D to its
# synth-sweep-details/, and redigest.
fail() { echo "FAIL: $*"; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
unpack_details() {
  tar xzf "$1" -C "$DIR" || fail "cannot unpack $1"
  D=$DIR/synth-sweep-details
}
# redigest SWEEP ROW TSV: gives each line of a committed details TSV of ROW the digest today's
# code gives its config's kernel (kforge-synth-sweep's: sha256 of the source, a newline and the
# launch plan; --sources writes the config above the source and a newline after the plan), so
# that a resume test sees the committed results as results of today's kernels. The engine's
# sources change; what carries a result (its kernel's digest) does not.
redigest() {
  local sweep=$1 row=$2 tsv=$3 src=$DIR/redigest-sources cu
  "$sweep" --rows "$row" --compile-only --jobs 1 --sources "$src" >"$DIR/redigest.log" 2>&1 ||
    fail "kforge-synth-sweep --sources failed for $row: $(cat "$DIR/redigest.log")"
  for cu in "$src/$row".*.cu; do
    printf '%s\t%s\n' "$(head -1 "$cu" | sed 's|^// ||')" \
      "$({ tail -n +2 "$cu"; printf '\n'; head -c -1 "${cu%.cu}.plan.json"; } | sha256sum |
        cut -d' ' -f1)"
  done >"$DIR/digests"
  awk -F'\t' 'BEGIN {OFS = "\t"} NR == FNR {d[$1] = $2; next} FNR == 1 || !($1 in d) {print; next}
              {$12 = d[$1]; print}' "$DIR/digests" "$tsv" >"$DIR/redigested" &&
    mv "$DIR/redigested" "$tsv" || fail "cannot redigest $tsv"
}
