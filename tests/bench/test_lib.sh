# Sourced by the bench tools' shell tests: fail, a scratch directory ($DIR) removed at exit, and
# unpack_details TGZ, which unpacks a committed sweep's tarball into $DIR and sets D to its
# synth-sweep-details/.
fail() { echo "FAIL: $*"; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
unpack_details() {
  tar xzf "$1" -C "$DIR" || fail "cannot unpack $1"
  D=$DIR/synth-sweep-details
}
