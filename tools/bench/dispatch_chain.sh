#!/usr/bin/env bash
# Host cost of guarded dispatch per call, undiluted: a model of 64 softmax(dim=-1) calls on a
# [64,512] tensor (softmax_chain_model.py), each call rewritten to the runtime's fixture kernel
# (tests/gpu/kernels/softmax_two_launches.cu, a known-correct softmax in two launches, marked as
# the run's winner by simulate_validated_run: nothing about its speed is claimed here), then
# dispatch_overhead.py: the rewrite against the original, and the rewrite with KFORGE_DISABLE=1
# (the graph's added nodes and the fallback without the launch path). The same for the model
# with `* 0.5 + 0.25` after each softmax (--fusible): whether the rewrite keeps the fusions
# TorchScript's executor makes.
#   dispatch_chain.sh BIN_DIR WORK_DIR [--device cuda]   (prepare with --prepare-only where
#   there is no GPU: the bundle needs no GPU, the timing on CUDA does)
set -euo pipefail
BIN=$1 WORK=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${KFORGE_PYTHON:-python3}
PREPARE_ONLY=0
if [[ ${1:-} == --prepare-only ]]; then PREPARE_ONLY=1; shift; fi
for variant in plain fusible; do
  dir=$WORK/$variant
  [[ -f $dir/bundle/manifest.json ]] && continue
  rm -rf "$dir" && mkdir -p "$dir"
  "$PY" "$HERE/softmax_chain_model.py" "$dir/model" --calls 64 $([[ $variant == fusible ]] && echo --fusible)
  set +e
  "$BIN/kforge" optimize "$dir/model/model.pt" --inputs "$dir/model/inputs.pt" --out "$dir/run" \
    --device cpu --top 1 --iterations 1 --seed 1 > "$dir/optimize.log" 2>&1
  rc=$?
  set -e
  if [[ $rc != 3 ]]; then echo "kforge optimize exited $rc (expected 3)"; cat "$dir/optimize.log"; exit 1; fi
  "$BIN/simulate_validated_run" "$dir/run" "aten::softmax dim=-1" \
    "$ROOT/tests/gpu/kernels/softmax_two_launches.cu" "$ROOT/tests/gpu/kernels/softmax_two_launches.json" \
    > /dev/null
  "$BIN/kforge" export "$dir/run" --out "$dir/bundle" > "$dir/export.log"
done
[[ $PREPARE_ONLY == 1 ]] && { echo "bundles ready under $WORK"; exit 0; }
# KFORGE_DISPATCH_LIBS: runtime libraries to compare (space-separated), each timed in turn.
LIBS=${KFORGE_DISPATCH_LIBS:-$BIN/../lib/libkforge_runtime.so}
for variant in plain fusible; do
  for lib in $LIBS; do
    for disable in 0 1; do
      echo -n "$variant, $lib, KFORGE_DISABLE=$disable: "
      KFORGE_DISABLE=$disable "$PY" "$HERE/dispatch_overhead.py" "$WORK/$variant/bundle" \
        --lib "$lib" --original "$WORK/$variant/model/model.pt" \
        --inputs "$WORK/$variant/model/inputs.pt" --calls 500 "$@"
    done
  done
done
