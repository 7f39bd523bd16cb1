#!/usr/bin/env bash
# integration test (no GPU) of tools/bench/prior_ranking.py: the priors kforge-synth-sweep
# --priors writes for the rows of a committed GPU sweep, ranked against that sweep's measured
# times (docs/benchmarks/2026-12-01-sweep-details), give one line per row; a directory without
# details, or a TSV that is not one, is an error that names it; and the priors' first picks on
# rows of more committed sweeps stay near the fastest measured config.
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
# first_picks_within NAME DETAILS_DIR ROWS LIMIT: on those rows of a committed sweep the prior's
# first pick ran within LIMIT x the fastest swept config.
first_picks_within() {
  "$SWEEP" --rows "$3" --compile-only --priors "$DIR/$1-priors.tsv" >"$DIR/log" 2>&1 ||
    fail "--priors failed: $(tail -5 "$DIR/log")"
  out=$(python3 "$ROOT/tools/bench/prior_ranking.py" "$DIR/$1-priors.tsv" "$2") ||
    fail "prior_ranking.py failed: $out"
  firsts=$(grep -o "prior's first [0-9.]*x" <<<"$out" | grep -o "[0-9.]*x" | tr -d x)
  [[ $(wc -w <<<"$firsts") == $(tr ',' ' ' <<<"$3" | wc -w) ]] || fail "rows $3 expected: $out"
  for f in $firsts; do
    python3 -c "import sys; sys.exit(0 if $f <= $4 else 1)" ||
      fail "$1: the prior's first pick ran ${f}x the fastest: $out"
  done
}
# The batch norm prior charges an occupancy cap's spills, and the cost model caps the DRAM
# bandwidth of a launch with fewer blocks than SMs: on the ResNet-50 rows of
# 2026-12-02-bn-pointers (call 1) the first picks ran within 1.10x of the fastest swept config
# (b32 1.27x and 1.38x before the first, b1 256x14 2.43x before the second).
mkdir -p "$DIR/bn" "$DIR/ew"
tar xzf "$ROOT/docs/benchmarks/2026-12-02-bn-pointers/call1-synth-sweep-ab.tgz" -C "$DIR/bn" ||
  fail "cannot unpack the batch norm sweep"
first_picks_within batch-norm "$DIR/bn/after/synth-sweep-details" \
  bn-r50-32x512x28-fp32,bn-r50-32x1024x14-fp32,bn-r50-1x128x28-fp32,bn-r50-1x256x14-fp32 1.10
# The cost model charges DRAM no last-wave tail over many waves: on the streaming rows of
# 2026-12-01-shape-key-and-spills (call 2) the first picks, one-shot grids, ran within 1.04x
# (the stride grids it picked before ran 1.05x and 1.06x).
tar xzf "$ROOT/docs/benchmarks/2026-12-01-shape-key-and-spills/call2-sweep-details.tgz" \
  -C "$DIR/ew" || fail "cannot unpack the elementwise sweep"
first_picks_within elementwise "$DIR/ew/synth-sweep-details" mask-add-bf16,mul-scale-bf16 1.04
# The cost model bounds the rate at which SMs start blocks, and rates a stream split's
# pointwise output pass above a finishing loop: on the VAE group norms' scratch configs and
# their stream twins (2026-12-02-stream-splits, call 3) the first picks ran within 1.03x (1.04x
# on 1x128x512^2 with neither; 1.18x with the stream rating alone, which put a stream split of
# 131k 32-thread blocks first).
mkdir -p "$DIR/st"
tar xzf "$ROOT/docs/benchmarks/2026-12-02-stream-splits/call3-apply-block-ab.tgz" -C "$DIR/st" ||
  fail "cannot unpack the stream twins"
first_picks_within stream "$DIR/st/w/main-1" gn-vae-128x512-fp32,gn-vae-256x256-fp32 1.03
# Once the output pass ran on the captured geometry, stream splits beat their scratch twins by
# more than the prior said: the prior rates them 0.84x where it rated them 0.935x, and on the
# twins of 2026-12-02-captured-apply (call 1) its first picks ran within 1.05x (1.05-1.22x at
# 0.935x, a scratch config first on 1x256x512^2 bf16).
mkdir -p "$DIR/ca"
CA=$ROOT/docs/benchmarks/2026-12-02-captured-apply/call1-captured-apply-ab.tgz
tar xzf "$CA" -C "$DIR/ca" && tar xzf "$DIR/ca/ab/synth-configs-ab.tgz" -C "$DIR/ca" ||
  fail "cannot unpack the captured-apply twins"
first_picks_within captured-stream "$DIR/ca/main-1" \
  gn-vae-128x512-fp32,gn-vae-256x256-fp32,gn-vae-fp32,gn-bf16 1.05
# A captured entry's registers are those of the elements a thread holds in the captured row: on
# Qwen3's launch-bound RMSNorm rows (2026-12-05-session39, calls 10-11, H100) the first picks
# ran within 1.30x (1.29x, 1.19x; 1.57x and 1.42x with the generic entry's registers, which put
# the fastest configs, one wave of 256-thread blocks, at two waves).
mkdir -p "$DIR/rms"
tar xzf "$ROOT/docs/benchmarks/2026-12-05-session39/call10-11-sweep-details.tgz" -C "$DIR/rms" ||
  fail "cannot unpack the RMSNorm sweeps"
first_picks_within rms-chain "$DIR/rms" rms-chain-qwen3-q,rms-chain-qwen3-512 1.30
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
