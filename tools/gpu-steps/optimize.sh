#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): the whole user path on example models —
# `kforge optimize` (which exports the bundle into RUN/export), then tools/check-optimized
# comparing the optimized model with the original (outputs, fallback counters, end-to-end
# latency vs eager and torch.compile), then per target eager and torch.compile of the single
# aten op on its captured inputs (`kforge report --torch-rows` -> tools/bench/
# torch_compile_times.py) and the benchmark tables (tools/bench/target_table.py). Each model's
# summary, search.txt (what each search tried: `kforge report --search`), check table
# (check.txt, check.json), torch-times.json, table.md and coverage.md
# (tools/bench/coverage_table.py) are kept under WORK/optimize-<name>/; every model's tables
# together in OUT_DIR/optimize-tables.md, and
# every run's small files (reports, tables, logs) in OUT_DIR/optimize-results.tgz, both
# rewritten after every run, so a call cut short by its time limit still brings back what ran.
#   KFORGE_GPU_WORK_DIR=DIR                  where the exported models and run directories go
#                                            (default OUT_DIR; thousands of files, so on the
#                                            device a folder outside $OUT, which returns 8 files)
#   KFORGE_GPU_MODELS="resnet50_b32 qwen3"   which models (default: the issue's, MODELS below;
#                                            "zoo" or zoo_<name>: ZOO_MODELS, beyond them)
#   KFORGE_GPU_OPTIMIZE_ITERATIONS=N         evaluations per target (default 30)
#   KFORGE_GPU_OPTIMIZE_TOP=K                targets searched per model (default 3)
#   KFORGE_GPU_OPTIMIZE_OPS=aten::relu_,...  only targets of these ops (kforge optimize --ops)
#   KFORGE_GPU_OPTIMIZE_FUSE=0               single ops only (kforge optimize --no-fuse)
#   KFORGE_GPU_OPTIMIZE_STOP_NEAR_FLOOR=F     kforge optimize --stop-near-floor F
#   KFORGE_GPU_OPTIMIZE_RESUME=1             continue a model's run left in WORK by an earlier
#                                            call (kforge optimize --resume; default: start over)
#   KFORGE_GPU_OPTIMIZE_GPUS=0,1             passed to --gpus (default: all of them)
#   KFORGE_GPU_OPTIMIZE_LANES=N              models run N at a time, each lane on a GPU of its
#                                            own (default: one lane per GPU, or 1 with
#                                            KFORGE_GPU_OPTIMIZE_GPUS); a device call's time
#                                            counts per machine, so two GPUs do twice the models
#   KFORGE_GPU_TORCH_BUDGET_S=S              torch_compile_times.py --time-budget-s (default 300);
#                                            it also times the exported kernels beside
#                                            torch.compile (--kforge-bundle)
# A model's fourth field names the op of the seed paper's figure for it (OP:K): a second run,
# optimize-<name>-paper, searches the top K targets of that op alone with
# KFORGE_GPU_PAPER_ITERATIONS (default: the same iterations; issue 6 compares them with the
# paper's speedups at 50 iterations or fewer); KFORGE_GPU_PAPER=0 leaves these runs out.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=$(realpath -m "${1:-out/gpu-check}")
WORK=$(realpath -m "${KFORGE_GPU_WORK_DIR:-$OUT_DIR}")
M=$WORK/optimize-models
ITERATIONS=${KFORGE_GPU_OPTIMIZE_ITERATIONS:-30}
TOP=${KFORGE_GPU_OPTIMIZE_TOP:-3}
GPUS=()
[[ -n ${KFORGE_GPU_OPTIMIZE_GPUS:-} ]] && GPUS=(--gpus "$KFORGE_GPU_OPTIMIZE_GPUS")
TORCH_BUDGET_S=${KFORGE_GPU_TORCH_BUDGET_S:-300}
mkdir -p "$M" "$OUT_DIR"
# name | factory | export/factory keyword arguments | seed paper's op:K
MODELS=(
  "resnet50_b1|examples/resnet50.py:make|batch=1|"
  "resnet50_b32|examples/resnet50.py:make|batch=32|adaptive_avg_pool2d:1"
  "qwen3|examples/qwen3.py:make|seq=2048 dtype=bfloat16|"
  "qwen3_moe|examples/qwen3_moe.py:make|seq=2048 dtype=bfloat16|softmax:2"
  "gemma3|examples/gemma3.py:make|seq=2048 dtype=bfloat16|softmax:1"
  "sd_vae|examples/sd_vae.py:make|size=512|group_norm:1"
)
# Models kforge was not tuned on (examples/zoo.py): run only when KFORGE_GPU_MODELS names
# them or says "zoo".
ZOO_MODELS=(
  "zoo_mobilenet_v3|examples/zoo.py:mobilenet_v3|batch=32|"
  "zoo_efficientnet|examples/zoo.py:efficientnet|batch=32|"
  "zoo_convnext|examples/zoo.py:convnext|batch=32|"
  "zoo_vit|examples/zoo.py:vit|batch=32|"
  "zoo_swin|examples/zoo.py:swin|batch=32|"
  "zoo_densenet|examples/zoo.py:densenet|batch=32|"
  "zoo_bert|examples/zoo.py:bert|batch=8 seq=512 dtype=float16|"
  "zoo_t5_encoder|examples/zoo.py:t5_encoder|batch=8 seq=512 dtype=bfloat16|"
  "zoo_gpt2|examples/zoo.py:gpt2|batch=4 seq=1024 dtype=float16|"
  "zoo_llama|examples/zoo.py:llama|seq=2048 dtype=bfloat16|"
  "zoo_phi|examples/zoo.py:phi|seq=2048 dtype=bfloat16|"
  "zoo_unet|examples/zoo.py:unet|batch=8 size=64|"
)
wanted() {  # NAME: whether KFORGE_GPU_MODELS selects it
  local name=$1 models=" ${KFORGE_GPU_MODELS:-} "
  if [[ -z ${KFORGE_GPU_MODELS:-} ]]; then
    [[ $name != zoo_* ]]
  else
    [[ $models == *" $name "* || ($name == zoo_* && $models == *" zoo "*) ]]
  fi
}
SEARCH_FLAGS=${KFORGE_GPU_OPTIMIZE_OPS:+ --ops $KFORGE_GPU_OPTIMIZE_OPS}
SEARCH_FLAGS+=${KFORGE_GPU_OPTIMIZE_STOP_NEAR_FLOOR:+ --stop-near-floor $KFORGE_GPU_OPTIMIZE_STOP_NEAR_FLOOR}
[[ ${KFORGE_GPU_OPTIMIZE_FUSE:-1} == 0 ]] && SEARCH_FLAGS+=" --no-fuse"
rc=0
jobs=()
for entry in "${MODELS[@]}" "${ZOO_MODELS[@]}"; do
  IFS='|' read -r name factory kwargs paper <<<"$entry"
  wanted "$name" || continue
  jobs+=("$name|$factory|$kwargs|--top $TOP --iterations $ITERATIONS$SEARCH_FLAGS")
  [[ -n $paper && ${KFORGE_GPU_PAPER:-1} != 0 ]] && jobs+=("$name-paper|$factory|$kwargs|--ops ${paper%:*} --top ${paper#*:} --iterations ${KFORGE_GPU_PAPER_ITERATIONS:-$ITERATIONS}")
done

run_job() {  # $1: a jobs entry; returns non-zero when a step failed
  local name factory kwargs selection model run pair job_rc=0
  IFS='|' read -r name factory kwargs selection <<<"$1"
  model=${name%-paper}
  local kw=()
  for pair in $kwargs; do kw+=(--kw "$pair"); done
  run=$WORK/optimize-$name
  echo "== $name: export, optimize ($selection), check, tables"
  rm -f "$run"/{torch-rows,torch-times,check}.json  # never join a previous round's files
  # An earlier round's run in the same work dir (a warm device machine keeps it): continue it
  # with KFORGE_GPU_OPTIMIZE_RESUME=1, else start over (kforge optimize refuses to write into
  # it, and the steps below would time and tabulate the old run's kernels as if new).
  local resume=()
  if [[ -d $run ]]; then
    if [[ ${KFORGE_GPU_OPTIMIZE_RESUME:-0} == 1 ]]; then
      resume=(--resume)
    else
      echo "$name: removing the earlier run in $run (KFORGE_GPU_OPTIMIZE_RESUME=1 continues it)"
      rm -rf "$run"
    fi
  fi
  if [[ ! -f $M/$model/model.pt ]]; then
    python3 tools/kforge-export "$factory" --out "$M/$model" --device cuda "${kw[@]}" || return 1
  fi
  # shellcheck disable=SC2086  # $selection is flags
  build/bin/kforge optimize "$M/$model/model.pt" --inputs "$M/$model/inputs.pt" \
    --out "$run" $selection --seed 1 "${GPUS[@]}" "${resume[@]}" >"$run.log" 2>&1 || job_rc=1
  cat "$run/summary.txt" 2>/dev/null || tail -5 "$run.log"
  # What each search tried (its trees stay on the machine; this text goes into the archive).
  [[ -f $run/run.json ]] && build/bin/kforge report "$run" --search >"$run/search.txt" 2>&1
  if [[ -f $run/report.json ]]; then
    # torch.compile of each target's op alone, on the inputs kforge validated against, with
    # the exported kernel timed beside it in the same loop; the inputs (up to 100s of MB) are
    # dropped once timed.
    local beside=()
    [[ -f $run/export/manifest.json ]] &&
      beside=(--kforge-bundle "$run/export" --kforge-lib build/lib/libkforge_runtime.so)
    if build/bin/kforge report "$run" --torch-rows "$run/torch-rows.json" \
         --torch-inputs "$run/torch-inputs"; then
      python3 tools/bench/torch_compile_times.py --rows-json "$run/torch-rows.json" \
        --out "$run/torch-times.json" --time-budget-s "$TORCH_BUDGET_S" "${beside[@]}" ||
        job_rc=1
    else
      job_rc=1
    fi
    rm -rf "$run/torch-inputs"
  fi
  if [[ -f $run/export/manifest.json ]]; then
    python3 tools/check-optimized "$run/export" --device cuda --module "$factory" "${kw[@]}" \
      --runs 50 --lib build/lib/libkforge_runtime.so --json-out "$run/check.json" |
      tee "$run/check.txt"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || job_rc=1
  else
    echo "$name: no bundle exported (no kernel beat eager, or the export failed: see $run.log)"
  fi
  if [[ -f $run/report.json ]]; then
    python3 tools/bench/target_table.py "$run" --out "$run/table.md" && cat "$run/table.md" ||
      job_rc=1
    # What was searched and the hottest ops skipped, why (a model kforge was not tuned on).
    python3 tools/bench/coverage_table.py "$run" --out "$run/coverage.md" >/dev/null || job_rc=1
  fi
  collect_results || job_rc=1
  return $job_rc
}

# OUT_DIR/optimize-tables.md and optimize-results.tgz over every run so far; lanes take turns
# (the lock lives outside OUT_DIR, whose files a device call brings back).
RESULTS_LOCK=$(mktemp "${TMPDIR:-/tmp}/kforge-optimize-results.XXXXXX")
collect_results() {
  local job run runs=()
  for job in "${jobs[@]}"; do
    run=$WORK/optimize-${job%%|*}
    [[ -f $run/report.json ]] && runs+=("$run")
  done
  ((${#runs[@]})) || return 0
  (
    flock 9
    python3 tools/bench/target_table.py "${runs[@]}" --out "$OUT_DIR/optimize-tables.md" \
      >/dev/null || exit 1
    # Every run's reports, tables, logs and winners' params in one file: the device tool
    # returns a limited number of files, and the run directories hold thousands. The export's
    # manifest goes too: it says which targets the optimized model runs a kernel for, which
    # target_table.py counts from the archive as it did on the machine. The lane logs still
    # grow (tar's status 1: a file changed while read).
    local lanes=("$OUT_DIR"/optimize-lane-*.txt) tar_rc=0
    (cd "$WORK" && find "${runs[@]##*/}" -maxdepth 2 -type f \( -path '*/export/manifest.json' -o \
      \( ! -path '*/*/*' \( -name '*.json' -o -name '*.txt' -o -name '*.md' \) \) \) \
      -print0 | tar czf "$OUT_DIR/optimize-results.tgz.part" \
      --warning=no-file-changed --null -T - optimize-*.log -C "$OUT_DIR" "${lanes[@]##*/}") ||
      tar_rc=$?
    ((tar_rc <= 1)) && mv "$OUT_DIR/optimize-results.tgz.part" "$OUT_DIR/optimize-results.tgz"
  ) 9>"$RESULTS_LOCK"
}

# Lanes: a model's runs stay in one lane (they share its exported model.pt), lanes take models
# in turn, and each lane sees only its GPU, so no timing shares a GPU with another lane's.
GPU_COUNT=$(nvidia-smi -L 2>/dev/null | wc -l)
LANES=${KFORGE_GPU_OPTIMIZE_LANES:-$((${#GPUS[@]} ? 1 : GPU_COUNT))}
((LANES >= 1)) || LANES=1
declare -A lane_of=()
lane_jobs=()
for job in "${jobs[@]}"; do
  model=${job%%|*} && model=${model%-paper}
  [[ -n ${lane_of[$model]:-} ]] || lane_of[$model]=$((${#lane_of[@]} % LANES))
  lane_jobs[${lane_of[$model]}]+="$job"$'\n'
done
pids=()
for ((lane = 0; lane < LANES; lane++)); do
  [[ -n ${lane_jobs[$lane]:-} ]] || continue
  (
    ((LANES > 1)) && export CUDA_VISIBLE_DEVICES=$lane
    lane_rc=0
    while IFS= read -r job; do
      [[ -n $job ]] && { run_job "$job" </dev/null || lane_rc=1; }  # stdin: the job list
    done <<<"${lane_jobs[$lane]}"
    exit $lane_rc
  ) >"$OUT_DIR/optimize-lane-$lane.txt" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
cat "$OUT_DIR"/optimize-lane-*.txt 2>/dev/null
collect_results || rc=1
[[ -f $OUT_DIR/optimize-tables.md ]] && cat "$OUT_DIR/optimize-tables.md"
rm -f "$RESULTS_LOCK"
exit $rc
