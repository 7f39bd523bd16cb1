#!/usr/bin/env bash
# Test fixtures (ctest FIXTURES_SETUP runtime_model_<name>): a real model, an honest
# `kforge optimize --device cpu` run on it (captures, proposes and compiles; exit 3: no GPU),
# winners marked by the SimulatedValidation fixture (simulate_validated_run: nothing measured)
# and `kforge export` of the result.
#   make_model_fixture.sh BIN_DIR PYTHON TEST_SRC_DIR REPO OUT_DIR resnet50|qwen3|unmatched|chained|fused|rms_norm|computed_shape
# resnet50: examples/resnet50.py at batch 1; every op group is captured (--top 45 leaves none
#   out), and the first compiled candidate of three batch_norm targets — the shapes that won on
#   the H200 at batch 32 — is marked validated.
# qwen3: examples/qwen3.py at seq 32, fp32; softmax, the residual add, silu, the RMSNorm mean
#   and the scores' scaling by a traced Python number (mul by the graph's f64 constant 0.125).
# unmatched, chained: make_small_model.py (a softmax whose dim is not a graph constant: its export
#   has nothing to rewrite; two chained softmax nodes); the known-correct row softmax of
#   tests/gpu/kernels is marked validated.
# fused: tests/capture/make_chain_model.py, its chain softmax(x * 0.125 + mask) a target of its
#   own (the others are captured with --no-fuse: single ops), gets the hand-written
#   tests/gpu/kernels/masked_softmax_chain.cu (a fixed, known-correct source), marked validated.
# rms_norm: make_small_model.py's written-out RMSNorm, captured with --fuse: the first compiled
#   candidate of its chain (pow -> mean -> add -> rsqrt -> mul -> mul, x read twice) is marked.
# computed_shape: make_small_model.py's repeat_kv (a reshape of an expanded view, its sizes
#   computed in the graph): the first compiled candidate of the reshape is marked.
# Writes OUT_DIR/{model/, run/, target_ids, export.json or export.err, export.rc}.
set -euo pipefail
BIN=$1 PY=$2 SRC=$3 REPO=$4 OUT=$5 NAME=$6
[[ -x $PY ]] || PY=python3
if [[ -n ${KFORGE_PYTHON:-} ]]; then PY=$KFORGE_PYTHON; fi
rm -rf "$OUT" && mkdir -p "$OUT"
cd "$REPO"
case $NAME in
  resnet50)
    "$PY" tools/kforge-export examples/resnet50.py:make --out "$OUT/model" --batch 1 > "$OUT/kforge-export.log" 2>&1
    TOP=45 SELECT=("aten::batch_norm in0=1,256,56,56" "aten::batch_norm in0=1,512,28,28"
                   "aten::batch_norm in0=1,1024,14,14") ;;
  qwen3)
    "$PY" tools/kforge-export examples/qwen3.py:make --out "$OUT/model" --seq 32 --dtype float32 \
      > "$OUT/kforge-export.log" 2>&1
    TOP=60 SELECT=("aten::softmax in0=1,8,32,32" "aten::add in0=1,32,512" "aten::silu in0=1,32,1536"
                   "aten::mean in0=1,32,512" "aten::mul in0=1,8,32,32") ;;
  unmatched|chained)
    "$PY" "$SRC/make_small_model.py" "$OUT/model" $NAME > "$OUT/kforge-export.log" 2>&1
    TOP=2 SELECT=() ;;
  rms_norm)
    "$PY" "$SRC/make_small_model.py" "$OUT/model" $NAME > "$OUT/kforge-export.log" 2>&1
    TOP=1 FUSE=--fuse SELECT=() ;;
  computed_shape)
    "$PY" "$SRC/make_small_model.py" "$OUT/model" $NAME > "$OUT/kforge-export.log" 2>&1
    TOP=2 SELECT=("aten::reshape in0=2,4,2,64,32") ;;
  fused)
    "$PY" "$REPO/tests/capture/make_chain_model.py" "$OUT/model" > "$OUT/kforge-export.log" 2>&1
    TOP=6 FUSE=--fuse SELECT=() ;;
  *) echo "unknown fixture model $NAME"; exit 2 ;;
esac
set +e
"$BIN/kforge" optimize "$OUT/model/model.pt" --inputs "$OUT/model/inputs.pt" --out "$OUT/run" \
  --device cpu --top $TOP "${FUSE:---no-fuse}" --iterations 1 --seed 1 > "$OUT/optimize.log" 2>&1
rc=$?
set -e
if [[ $rc != 3 ]]; then
  echo "kforge optimize --device cpu exited $rc (expected 3: no GPU)"; cat "$OUT/optimize.log"; exit 1
fi
if [[ $NAME == fused ]]; then
  chain=$("$PY" -c 'import json,sys
for t in json.load(open(sys.argv[1]))["targets"]:
    if [n["op"] for n in t["nodes"]] == ["aten::mul", "aten::add", "aten::softmax"]:
        print(t["id"])' "$OUT/run/profile.json")
  "$BIN/simulate_validated_run" "$OUT/run" "$chain" \
    "$SRC/../gpu/kernels/masked_softmax_chain.cu" "$SRC/../gpu/kernels/masked_softmax_chain.json" \
    > "$OUT/target_ids"
elif [[ $NAME == rms_norm ]]; then
  chain=$("$PY" -c 'import json,sys
for t in json.load(open(sys.argv[1]))["targets"]:
    if t["nodes"][0]["op"] == "aten::pow":
        print(t["id"])' "$OUT/run/profile.json")
  "$BIN/simulate_validated_run" "$OUT/run" --compiled "$chain" > "$OUT/target_ids"
elif [[ $NAME == unmatched || $NAME == chained ]]; then
  dim=$([[ $NAME == unmatched ]] && echo 1 || echo -1)
  "$BIN/simulate_validated_run" "$OUT/run" "aten::softmax dim=$dim" \
    "$SRC/../gpu/kernels/softmax_rows.cu" "$SRC/../gpu/kernels/softmax_rows.json" > "$OUT/target_ids"
else
  "$BIN/simulate_validated_run" "$OUT/run" --compiled "${SELECT[@]}" > "$OUT/target_ids"
fi
set +e
"$BIN/kforge" export "$OUT/run" --out "$OUT/bundle" --json > "$OUT/export.json" 2> "$OUT/export.err"
echo $? > "$OUT/export.rc"
set -e
echo "fixture $NAME ready in $OUT (export exit $(cat "$OUT/export.rc"))"
