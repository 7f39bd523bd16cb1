#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): issue 5's benchmark (b) — on three
# anchor targets of ../shared/GPU.md (adaptive_avg_pool2d 32×2048×7×7, group_norm
# 1×512×128×128 and softmax 8×262144, all fp32: inputs of 13, 32 and 16 MiB, whose evaluations
# took 0.31 s and 0.94 s for the first two on 2026-11-30, so that 50 per method and seed fit one
# call), the best speedup over eager after 10, 25 and 50
# evaluations by the MCTS (SearchDriver + synthesizer proposer) beside uniform random sampling
# of the same synthesizer space, every evaluation the worker's full validation + timing.
# Writes the table to $OUT_DIR/search-bench.md (rewritten as results come in, so a cut-short
# run still leaves what it measured) and every evaluation to search-bench-details/<row>.tsv.
#
# On a machine with several GPUs (KFORGE_SEARCH_BENCH_GPUS, default all nvidia-smi lists) each
# row runs as its own process on its own GPU, and search-bench.md joins their tables.
# Budget: about 7 minutes of GPU-machine time — the benchmark stops dispatching after
# KFORGE_SEARCH_BENCH_BUDGET_S (default 360 s; both methods run side by side, so a cut costs
# them alike and the table marks the shortened cells), then finishes what is in flight.
#   KFORGE_SEARCH_BENCH_ROWS=id,id        rows (kforge-bench-search --help; default the three)
#   KFORGE_SEARCH_BENCH_EVALUATIONS=N     evaluations per target and method (default 50)
#   KFORGE_SEARCH_BENCH_SEEDS=N           seeds per method (default 3)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
BENCH=build/bin/kforge-bench-search
BUDGET=${KFORGE_SEARCH_BENCH_BUDGET_S:-360}
EVALUATIONS=${KFORGE_SEARCH_BENCH_EVALUATIONS:-50}
SEEDS=${KFORGE_SEARCH_BENCH_SEEDS:-3}
ROWS=${KFORGE_SEARCH_BENCH_ROWS:-avgpool-r50,gn-vae-fp32,softmax-vocab}

if [[ ! -x $BENCH ]]; then
  echo "$BENCH is missing: build the kforge-bench-search target (tools/build) before tools/gpu-pack" |
    tee "$OUT_DIR/search-bench.md"
  exit 1
fi
rm -f "$OUT_DIR"/search-bench*.md
GPUS=${KFORGE_SEARCH_BENCH_GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
# Hard limit: the budget plus what is in flight when it ends (an evaluation of a large row
# may take seconds).
if ((GPUS >= 2)); then
  # One process per row, rows dealt round-robin over the GPUs: each row gets a GPU (or a
  # share of one) for the whole budget instead of a third of one.
  IFS=, read -r -a row_list <<<"$ROWS"
  threads=$(( $(nproc) / ${#row_list[@]} ))
  ((threads >= 2)) || threads=2
  ((threads <= 8)) || threads=8
  i=0
  for row in "${row_list[@]}"; do
    CUDA_VISIBLE_DEVICES=$((i % GPUS)) timeout $((BUDGET + 150)) "$BENCH" --rows "$row" \
      --evaluations "$EVALUATIONS" --seeds "$SEEDS" --time-budget-s "$BUDGET" \
      --compile-threads "$threads" --out "$OUT_DIR/search-bench-$row.md" \
      --details "$OUT_DIR/search-bench-details" >"$OUT_DIR/search-bench-$row.log" 2>&1 &
    i=$((i + 1))
  done
  rc=0
  for job in $(jobs -p); do wait "$job" || rc=$?; done
  for row in "${row_list[@]}"; do
    cat "$OUT_DIR/search-bench-$row.md" 2>/dev/null || tail -5 "$OUT_DIR/search-bench-$row.log"
    echo
  done >"$OUT_DIR/search-bench.md"
else
  timeout $((BUDGET + 150)) "$BENCH" --rows "$ROWS" --evaluations "$EVALUATIONS" --seeds "$SEEDS" \
    --time-budget-s "$BUDGET" --out "$OUT_DIR/search-bench.md" --details "$OUT_DIR/search-bench-details"
  rc=$?
fi
[[ $rc -eq 124 ]] && echo "kforge-bench-search hit its hard time limit; $OUT_DIR/search-bench.md holds what it had measured"
[[ -s $OUT_DIR/search-bench.md ]] ||
  echo "kforge-bench-search exited with $rc before writing a table; its log is search_bench.txt" >"$OUT_DIR/search-bench.md"
exit $rc
