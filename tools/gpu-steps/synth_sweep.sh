#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): issue 4's benchmark — for every anchor
# row of ../shared/GPU.md, the best synthesized config of a sweep of its family's space beside
# eager, torch.compile and the floor. Writes the table to $OUT_DIR/synth-sweep.md (rewritten
# after every row, so a cut-short run still leaves what it measured), torch.compile's times to
# torch-compile-times.json and every swept config's results to synth-sweep-details/<row>*.tsv.
#
# KFORGE_SWEEP_MODE=capped (default): one process on GPU 0; torch.compile stops starting
# compiles after KFORGE_SWEEP_TORCH_BUDGET_S (default 75 s), the sweep stops compiling at its
# KFORGE_SWEEP_BUDGET_S (default 200 s) and sweeps at most KFORGE_SWEEP_MAX_CONFIGS valid
# configs per row (default 500: the prior's best interleaved with seeded random ones).
#
# KFORGE_SWEEP_MODE=exhaustive: every valid config of every row (~228k), split over the
# machine's GPUs (KFORGE_SWEEP_GPUS, default: all nvidia-smi lists) — one kforge-synth-sweep
# --shard I/N --quick-only per GPU, each with its share of the cores, compiling 8 configs per
# NVRTC program (--batch). They stop compiling KFORGE_SWEEP_BUDGET_S (default 390 s) after
# their start, less --gpu-reserve-s for the quick passes still queued, and append every
# config's result to synth-sweep-details/<row>.shard-I-of-N.tsv. A later call continues where
# this one stopped: copy the previous call's synth-sweep-details/ to
# KFORGE_SWEEP_RESUME_FROM (it is copied into $OUT_DIR and read with --resume; the call's
# synth-sweep-details.tgz works too: a device call brings back at most 8 files, and a session
# with one GPU spreads the sweep over several calls, so commit it between sessions). Unless
# KFORGE_SWEEP_FINISH=0, torch.compile and `kforge-synth-sweep --finish` follow: the best
# quick-pass configs of all shards and calls through full validation, and the table, whose
# "configs swept" of "valid" says how much of each space is covered (equal: exhaustive).
# Measured cost (docs/benchmarks/2026-12-01-h200-vector-only-rows.md): ~0.34 CPU-s per
# distinct source on the H200 machine since vector kernels lost their per-element path, 131k
# sources for the 228k configs: ~45k core-s, ~50 min of compiling on one 16-core H200 (calls
# over two or three sessions), ~25 on a 32-core 2-GPU machine, ~12 on 64 cores / 4 GPUs.
# Calls but the last: KFORGE_SWEEP_FINISH=0 KFORGE_SWEEP_BUDGET_S=480
# KFORGE_SWEEP_TARBALL=$OUT/synth-sweep-details.tgz alone in a 600 s call (the quick passes
# stop at the budget too, but the chunk under way finishes: keep ~100 s between the budget and
# the call's limit; the tarball, repacked every minute, survives a kill at the limit); the
# last keeps ~200 s for torch.compile and --finish (KFORGE_SWEEP_BUDGET_S=300). Pack such calls
# lean — KFORGE_PACK_BINS="kforge-synth-sweep kforge-synth-sweep-quick kforge-nvrtc
# kforge-evaluator" tools/gpu-pack — as the committed tarball grows toward the 64 MiB carry.
#
# KFORGE_SWEEP_TORCH_TIMES=FILE: the table takes torch.compile's times from FILE (an earlier
# call's torch-compile-times.json, same rows and machine kind) instead of measuring them again:
# a finishing call then needs ~100 s, not ~250.
#
# KFORGE_SWEEP_ROWS=id,id picks rows, anchor or model rows (`kforge-synth-sweep --rows x` lists them).
# KFORGE_SWEEP_WHERE='name=value;...' sweeps only the configs with those values (a capped call's
# table ranks those alone; an exhaustive call's --finish ranks them with the resumed details).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
# KFORGE_SWEEP_BIN: another build's kforge-synth-sweep (its children beside it), as
# synth_sweep_ab.sh sweeps with the build tools/gpu-pack carried to .carry/ab/bin.
SWEEP=${KFORGE_SWEEP_BIN:-build/bin/kforge-synth-sweep}
MODE=${KFORGE_SWEEP_MODE:-capped}
TORCH_BUDGET=${KFORGE_SWEEP_TORCH_BUDGET_S:-75}
row_args=()
[[ -n ${KFORGE_SWEEP_ROWS:-} ]] && row_args=(--rows "$KFORGE_SWEEP_ROWS")
# The sweeping runs only: an exhaustive call's --finish still ranks every config its details hold.
sweep_args=("${row_args[@]}")
[[ -n ${KFORGE_SWEEP_WHERE:-} ]] && sweep_args+=(--where "$KFORGE_SWEEP_WHERE")

if [[ ! -x $SWEEP ]]; then
  echo "$SWEEP is missing: build the kforge-synth-sweep target (tools/build) before tools/gpu-pack" |
    tee "$OUT_DIR/synth-sweep.md"
  exit 1
fi
"$SWEEP" "${row_args[@]}" --emit-rows "$OUT_DIR/synth-sweep-rows.json" || exit 1

# torch.compile alone on the GPU. Hard limit: its budget plus one slow last compile.
torch_times() {
  if [[ -n ${KFORGE_SWEEP_TORCH_TIMES:-} ]]; then
    [[ -s $KFORGE_SWEEP_TORCH_TIMES ]] ||
      { echo "KFORGE_SWEEP_TORCH_TIMES=$KFORGE_SWEEP_TORCH_TIMES: no such file"; exit 2; }
    torch_args=(--torch-times "$KFORGE_SWEEP_TORCH_TIMES")
    return
  fi
  rm -f "$OUT_DIR/torch-compile-times.json"
  timeout $((TORCH_BUDGET + 90)) python3 tools/bench/torch_compile_times.py \
    --rows-json "$OUT_DIR/synth-sweep-rows.json" --out "$OUT_DIR/torch-compile-times.json" \
    --time-budget-s "$TORCH_BUDGET" ||
    echo "torch_compile_times.py failed (exit $?): the table goes without torch.compile"
  torch_args=()
  [[ -s $OUT_DIR/torch-compile-times.json ]] && torch_args=(--torch-times "$OUT_DIR/torch-compile-times.json")
}

finish_table() {  # $1: the sweep's exit status
  [[ $1 -eq 124 ]] && echo "kforge-synth-sweep hit its hard time limit; $OUT_DIR/synth-sweep.md holds the rows it finished"
  [[ -s $OUT_DIR/synth-sweep.md ]] ||
    echo "kforge-synth-sweep exited with $1 before writing a table; its log is synth_sweep.txt" >"$OUT_DIR/synth-sweep.md"
}

if [[ $MODE == capped ]]; then
  BUDGET=${KFORGE_SWEEP_BUDGET_S:-200}
  MAX_CONFIGS=${KFORGE_SWEEP_MAX_CONFIGS:-500}
  torch_times
  # The sweep. Hard limit: its budget plus the last rows' validation; the table file keeps
  # every finished row if it is cut.
  rm -f "$OUT_DIR/synth-sweep.md"
  timeout $((BUDGET + 150)) "$SWEEP" "${sweep_args[@]}" --max-configs "$MAX_CONFIGS" \
    --time-budget-s "$BUDGET" "${torch_args[@]}" --out "$OUT_DIR/synth-sweep.md" \
    --details "$OUT_DIR/synth-sweep-details"
  rc=$?
  finish_table $rc
  exit $rc
fi
if [[ $MODE != exhaustive ]]; then
  echo "KFORGE_SWEEP_MODE=$MODE: use capped or exhaustive" | tee "$OUT_DIR/synth-sweep.md"
  exit 2
fi

BUDGET=${KFORGE_SWEEP_BUDGET_S:-390}
DETAILS=$OUT_DIR/synth-sweep-details
mkdir -p "$DETAILS"
if [[ -n ${KFORGE_SWEEP_RESUME_FROM:-} ]]; then
  FROM=$KFORGE_SWEEP_RESUME_FROM
  if [[ -f $FROM && $FROM == *.tgz ]]; then
    tar xzf "$FROM" -C "$DETAILS" --strip-components=1 ||
      { echo "KFORGE_SWEEP_RESUME_FROM=$FROM: not a tarball of details" | tee "$OUT_DIR/synth-sweep.md"; exit 2; }
  elif [[ -d $FROM ]]; then
    cp -n "$FROM"/*.tsv "$FROM"/*.eager-us "$DETAILS"/ 2>/dev/null
  else
    echo "KFORGE_SWEEP_RESUME_FROM=$FROM is neither a directory nor a .tgz: pass the previous call's synth-sweep-details/ or synth-sweep-details.tgz" |
      tee "$OUT_DIR/synth-sweep.md"
    exit 2
  fi
  echo "resuming from $(cat "$DETAILS"/*.tsv 2>/dev/null | wc -l) lines of earlier details"
fi
GPUS=${KFORGE_SWEEP_GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
((GPUS >= 1)) || GPUS=1
CORES=$(nproc)
JOBS=$((CORES / GPUS - 1)) # one core per shard for its quick-pass child
((JOBS >= 1)) || JOBS=1
echo "exhaustive sweep: $GPUS shards, $JOBS compile threads each, compile budget $BUDGET s"
# One file that a device call can bring back and a later session commit and resume from
# (tools/bench/pack_sweep_details.sh: one file per row of its finished lines). Packed every
# minute while the shards run too, so a call killed at its limit still leaves the latest: point
# KFORGE_SWEEP_TARBALL (default $OUT_DIR/synth-sweep-details.tgz) into the device call's $OUT.
# The shards replace their details files whole, so a pack never reads half a file.
TARBALL=${KFORGE_SWEEP_TARBALL:-$OUT_DIR/synth-sweep-details.tgz}
pack_details() {  # $1: a name of its own for each packer (a killed one may leave a tar running)
  tools/bench/pack_sweep_details.sh "$DETAILS" "$TARBALL" "$OUT_DIR/pack-$1"
}
(while sleep 60; do pack_details live; done) >/dev/null 2>&1 &
packer=$!
pids=()
for ((i = 0; i < GPUS; i++)); do
  CUDA_VISIBLE_DEVICES=$i timeout $((BUDGET + 200)) "$SWEEP" "${sweep_args[@]}" --shard "$i/$GPUS" \
    --resume --quick-only --batch 8 --jobs "$JOBS" --time-budget-s "$BUDGET" \
    --details "$DETAILS" --out "$OUT_DIR/synth-sweep-shard-$i.md" >"$OUT_DIR/synth-sweep-shard-$i.txt" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { r=$?; echo "shard $i exited with $r (log: synth-sweep-shard-$i.txt)"; rc=$r; }
  tail -5 "$OUT_DIR/synth-sweep-shard-$i.txt"
done
kill "$packer" 2>/dev/null
wait "$packer" 2>/dev/null
pack_details final
if [[ ${KFORGE_SWEEP_FINISH:-1} == 0 ]]; then
  echo "KFORGE_SWEEP_FINISH=0: no table this call; resume from $DETAILS"
  exit $rc
fi
torch_times
rm -f "$OUT_DIR/synth-sweep.md"
timeout 400 "$SWEEP" "${row_args[@]}" --finish "${torch_args[@]}" --details "$DETAILS" \
  --out "$OUT_DIR/synth-sweep.md"
rc=$?
finish_table $rc
exit $rc
