// CudaEvaluationBackend: the GPU side of a kforge-evaluator child. It shares the device's
// primary CUDA context with LibTorch, loads each candidate's cubin with the driver API,
// validates it (DESIGN.md, Validation policy) and times it against PyTorch eager (Timing
// method). Runs in the child process only: a kernel can take this process down.
#pragma once

#include <memory>

#include "services/worker/evaluator_child.h"

namespace kforge {

// The backend for the GPU the child sees as device 0 (the supervisor sets
// CUDA_VISIBLE_DEVICES); `reported_index` is that GPU's index on the worker, for GpuInfo.
std::unique_ptr<EvaluationBackend> MakeCudaEvaluationBackend(int reported_index);

}  // namespace kforge
