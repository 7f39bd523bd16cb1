#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR) for a machine with two GPUs: issue 5's
# distributed run. A real redis-server, `kforge serve capture|proposer|coordinator` and one
# `kforge serve worker` per GPU as separate processes on loopback; one job on the ResNet-50
# example (batch 32) submitted with `kforge submit`, followed with `kforge watch`. nvidia-smi
# samples each GPU's utilization while it runs. Then the same job, same seed, on a fresh store
# with one worker on GPU 0. Writes OUT_DIR/two-gpus.md: per target the best speedup of both
# runs, wall time, evaluations per worker and each GPU's busy fraction.
#   KFORGE_TWO_GPU_ITERATIONS=N   evaluations per target (default 20)
#   KFORGE_TWO_GPU_TOP=K          targets (default 3)
#   KFORGE_TWO_GPU_DRY_RUN=1      check the script on a machine without GPUs: CPU capture and
#                                 workers with the test-only --simulated-evaluator
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
W=$OUT_DIR/two-gpus
mkdir -p "$W"
KFORGE=$PWD/build/bin/kforge
ITERATIONS=${KFORGE_TWO_GPU_ITERATIONS:-20}
TOP=${KFORGE_TWO_GPU_TOP:-3}
DRY=${KFORGE_TWO_GPU_DRY_RUN:-0}
DEVICE=cuda
worker_eval=()
[[ $DRY == 1 ]] && DEVICE=cpu worker_eval=(--simulated-evaluator)
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [[ $GPUS -lt 2 && $DRY != 1 ]]; then
  echo "two_gpus: this machine has $GPUS GPU(s); the step needs 2 (run it on nvidia-h200-x2)" |
    tee "$OUT_DIR/two-gpus.md"
  exit 0
fi

python3 tools/kforge-export examples/resnet50.py:make --out "$W/model" --device "$DEVICE" --kw batch=32 || exit 1

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
}
trap stop_all EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() {  # HOST:PORT, seconds
  for _ in $(seq 1 $(($2 * 5))); do
    (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
    sleep 0.2
  done
  echo "nothing listens on $1 after $2 s"
  return 1
}

# run NAME GPU_LIST: one cluster, one job; leaves $W/NAME/{job.json,util.csv,*.log,wall_s}.
run_cluster() {
  local name=$1 gpus=$2 d=$W/$1
  mkdir -p "$d"
  local rp cap prop coord metrics
  rp=$(port) cap=127.0.0.1:$(port) prop=127.0.0.1:$(port) coord=127.0.0.1:$(port) metrics=127.0.0.1:$(port)
  local store=redis://127.0.0.1:$rp
  redis-server --port "$rp" --save '' --appendonly no >"$d/redis.log" 2>&1 &
  pids+=($!)
  wait_port "127.0.0.1:$rp" 20 || return 1
  "$KFORGE" serve capture --listen "$cap" --store "$store" >"$d/capture.log" 2>&1 &
  pids+=($!)
  "$KFORGE" serve proposer --listen "$prop" --store "$store" >"$d/proposer.log" 2>&1 &
  pids+=($!)
  "$KFORGE" serve coordinator --listen "$coord" --metrics "$metrics" --store "$store" \
    --proposer-address "$prop" --capture-address "$cap" --max-in-flight 8 \
    --max-in-flight-per-target 4 >"$d/coordinator.log" 2>&1 &
  pids+=($!)
  for a in "$cap" "$prop" "$coord"; do wait_port "$a" 60 || return 1; done
  for g in ${gpus//,/ }; do
    "$KFORGE" serve worker --listen 127.0.0.1:0 --store "$store" --coordinator "$coord" \
      --worker-id "gpu-$g" --gpus "$g" --max-outstanding 2 "${worker_eval[@]}" >"$d/worker-$g.log" 2>&1 &
    pids+=($!)
  done
  for g in ${gpus//,/ }; do
    for _ in $(seq 1 300); do grep -q "pulling work from" "$d/worker-$g.log" && break; sleep 1; done
  done
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits \
    -lms 250 >"$d/util.csv" 2>/dev/null &
  local smi=$!
  local start job
  start=$(date +%s.%N)
  job=$("$KFORGE" submit "$W/model/model.pt" --inputs "$W/model/inputs.pt" --device "$DEVICE" \
    "${selection[@]}" --iterations "$ITERATIONS" --seed 1 --json --coordinator "$coord" |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["job_id"])') || { kill $smi; return 1; }
  "$KFORGE" watch "$job" --coordinator "$coord" >"$d/watch.log" 2>&1
  local rc=$?
  python3 -c "import time;print(round(time.time()-$start,1))" >"$d/wall_s"
  kill $smi 2>/dev/null
  "$KFORGE" jobs --json --coordinator "$coord" >"$d/jobs.json"
  curl -s "http://$metrics/metrics" >"$d/metrics.txt" 2>/dev/null
  stop_all
  return $rc
}

rc=0
selection=(--top "$TOP")
run_cluster two 0,1 || rc=1
# The one-GPU run searches the very targets of the first (a fresh capture may rank near-equal
# targets differently).
mapfile -t ids < <(python3 -c 'import json,sys
for t in json.load(open(sys.argv[1]))[-1]["targets"]: print(t["target_id"])' "$W/two/jobs.json" 2>/dev/null)
selection=()
for id in "${ids[@]}"; do selection+=(--target "$id"); done
((${#selection[@]})) || selection=(--top "$TOP")
run_cluster one 0 || rc=1

python3 - "$W" "$ITERATIONS" "$TOP" >"$OUT_DIR/two-gpus.md" <<'EOF'
import collections, json, os, re, sys
w, iterations, top = sys.argv[1], sys.argv[2], sys.argv[3]

def job(name):
    try:
        jobs = json.load(open(os.path.join(w, name, "jobs.json")))
    except (OSError, ValueError) as e:
        return {"state": f"no job listing ({e})", "targets": []}
    return jobs[-1] if jobs else {"state": "no job", "targets": []}

def busy(name):
    """Fraction of nvidia-smi samples with utilization > 0, per GPU, while the job ran."""
    seen, on = collections.Counter(), collections.Counter()
    try:
        for line in open(os.path.join(w, name, "util.csv")):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3 and parts[2].isdigit():
                seen[parts[1]] += 1
                on[parts[1]] += int(parts[2]) > 0
    except OSError:
        pass
    return {g: on[g] / seen[g] for g in sorted(seen)}

def evaluations(name):
    counts = {}
    d = os.path.join(w, name)
    for f in sorted(os.listdir(d)):
        m = re.match(r"worker-(\d+)\.log$", f)
        if m:
            text = open(os.path.join(d, f), errors="replace").read()
            counts[m.group(1)] = len(re.findall(r"evaluating task", text))
    return counts

runs = {n: job(n) for n in ("two", "one")}
print(f"# Two GPU workers vs one, same job and seed ({iterations} iterations per target, top {top})\n")
print("| run | state | wall s | evaluations per worker (GPU: n) | GPU busy (share of 250 ms samples with utilization > 0) |")
print("| --- | --- | ---: | --- | --- |")
for n, label in (("two", "2 workers, GPUs 0 and 1"), ("one", "1 worker, GPU 0")):
    wall = open(os.path.join(w, n, "wall_s")).read().strip() if os.path.exists(os.path.join(w, n, "wall_s")) else "?"
    ev = ", ".join(f"{g}: {c}" for g, c in evaluations(n).items())
    b = ", ".join(f"GPU {g}: {f:.0%}" for g, f in busy(n).items())
    print(f"| {label} | {runs[n].get('state')} | {wall} | {ev} | {b} |")
print("\n| target | op / signature | best speedup, 2 workers | best speedup, 1 worker | verdicts (2 / 1) |")
print("| --- | --- | ---: | ---: | --- |")
one = {t["target_id"]: t for t in runs["one"].get("targets", [])}
for t in runs["two"].get("targets", []):
    o = one.get(t["target_id"], {})
    print(f"| {t['target_id'][:12]} | {t['op']} {t['signature'][:48]} | {t['best_speedup']:.2f}x | "
          f"{o.get('best_speedup', 0):.2f}x | {t['verdict_counts']} / {o.get('verdict_counts', {})} |")
EOF
cat "$OUT_DIR/two-gpus.md"
exit $rc
