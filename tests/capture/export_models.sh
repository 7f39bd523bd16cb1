#!/usr/bin/env bash
# Test fixture: exports the example models the capture tests profile, with tools/kforge-export.
#   export_models.sh SOURCE_DIR OUT_DIR cpu|cuda
# cpu: ResNet-50 at batch 1 and Qwen3 at seq 128 (traced on the CPU). cuda: ResNet-50 at batch
# 32 and Qwen3 at seq 512, traced on the GPU (traced LMs hard-code the device they ran on).
set -euo pipefail
SRC=$1 OUT=$2 DEVICE=$3
PY=${KFORGE_PYTHON:-}
if [[ -z $PY ]]; then
  if [[ -x $SRC/.venv/bin/python ]]; then PY=$SRC/.venv/bin/python; else PY=python3; fi
fi
mkdir -p "$OUT"
export_one() {  # NAME ARGS...
  local name=$1; shift
  if [[ -f $OUT/$name/model.pt && -f $OUT/$name/inputs.pt && $OUT/$name/model.pt -nt $SRC/examples/$name.py ]]; then
    echo "export_models: $OUT/$name is up to date"
    return
  fi
  "$PY" "$SRC/tools/kforge-export" "$SRC/examples/$name.py:make" --out "$OUT/$name" "$@"
}
if [[ $DEVICE == cuda ]]; then
  export_one resnet50 --batch 32 --device cuda
  export_one qwen3 --seq 512 --device cuda
else
  export_one resnet50 --batch 1
  export_one qwen3 --seq 128
fi
