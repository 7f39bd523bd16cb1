#!/usr/bin/env bash
# GPU round step (tools/gpu-check runs it with OUT_DIR): kforge-launch-overhead's tables — the
# same copy kernel launched with KfArgs (2,192 bytes) by value, with three tensors and with two
# pointers, one launch per rep and as CUDA-graph replays — to OUT_DIR/launch-overhead.md. Seconds.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT_DIR=${1:-out/gpu-check}
mkdir -p "$OUT_DIR"
build/bin/kforge-launch-overhead | tee "$OUT_DIR/launch-overhead.md"
exit "${PIPESTATUS[0]}"
