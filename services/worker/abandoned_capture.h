// After an exception inside a CUDA-graph capture (an op that cannot be captured), the stream is
// still capturing: end it and discard the partial graph so the stream can run work again.
// Shared by the evaluator's launch-bound timing and the sweep's quick pass, which link libcuda.
#pragma once

#include <cuda.h>

namespace kforge {

inline void EndAbandonedCapture(CUstream stream) {
  CUstreamCaptureStatus status;
  if (cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
      status != CU_STREAM_CAPTURE_STATUS_NONE) {
    CUgraph dangling = nullptr;
    cuStreamEndCapture(stream, &dangling);
    if (dangling != nullptr) cuGraphDestroy(dangling);
  }
}

}  // namespace kforge
