#!/usr/bin/env bash
# Test fixture (ctest FIXTURES_SETUP runtime_bundle): a bundle exported from an honest CPU run.
#   make_fixture.sh BIN_DIR PYTHON TEST_SRC_DIR OUT_DIR
# 1. the model of make_runtime_model.py; 2. `kforge optimize --device cpu --no-fuse` (captures
# single ops, proposes and compiles; exit 3: no GPU), kept as run_cpu_only/;
# 3. simulate_validated_run marks tests/gpu/kernels/softmax_two_launches.cu — a known-correct
# row softmax in two launches, the second early_start, through scratch — as the validated winner
# of the softmax(dim=-1) target (SimulatedValidation: nothing measured); 4. `kforge export`.
set -euo pipefail
BIN=$1 PY=$2 SRC=$3 OUT=$4
[[ -x $PY ]] || PY=python3
if [[ -n ${KFORGE_PYTHON:-} ]]; then PY=$KFORGE_PYTHON; fi
rm -rf "$OUT" && mkdir -p "$OUT"
"$PY" "$SRC/make_runtime_model.py" "$OUT/model"
set +e
"$BIN/kforge" optimize "$OUT/model/model.pt" --inputs "$OUT/model/inputs.pt" --out "$OUT/run" \
  --device cpu --top 4 --seed 1 --no-fuse > "$OUT/optimize.log" 2>&1
rc=$?
set -e
if [[ $rc != 3 ]]; then
  echo "kforge optimize --device cpu exited $rc (expected 3: no GPU)"; cat "$OUT/optimize.log"; exit 1
fi
cp -a "$OUT/run" "$OUT/run_cpu_only"
"$BIN/simulate_validated_run" "$OUT/run" "aten::softmax dim=-1" \
  "$SRC/../gpu/kernels/softmax_two_launches.cu" "$SRC/../gpu/kernels/softmax_two_launches.json" \
  > "$OUT/target_id"
"$BIN/kforge" export "$OUT/run" --out "$OUT/bundle" --json > "$OUT/export.json"
echo "fixture ready: $OUT/bundle (target $(cat "$OUT/target_id"))"
