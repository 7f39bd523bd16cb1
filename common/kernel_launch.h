// The driver-API side of running a candidate kernel, shared by the worker's evaluator and the
// runtime library: packing tensors into the kernel ABI (kforge_device.h), looking up a
// module's entry points, the per-function attributes a resolved launch plan needs, and the
// cuLaunchKernelEx calls on one stream. Torch-free: callers pass raw pointers and shapes.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cuda_driver.h"
#include "common/kforge_device.h"
#include "common/launch_plan.h"

namespace kforge {

// A loaded entry point, and whether its early_start launches may overlap the launch before
// them: decided once at load (it was compiled for sm_90 or newer and KFORGE_EARLY_START is not
// 0), not per call.
struct KernelFunction {
  CUfunction function = nullptr;
  bool early_start = false;
};

// Entry point name -> function of a loaded module.
using KernelFunctions = std::map<std::string, KernelFunction>;

// A strided view for the kernel ABI. Sizes and strides are in elements; dims past `ndim` are
// 1/0. `ndim` must be <= KF_MAX_DIMS (callers check).
KfTensor MakeKfTensor(void* data, int dtype, const int64_t* sizes, const int64_t* strides,
                      int ndim);

// The functions the plan's launches name. InvalidArgument names an entry the module lacks.
absl::StatusOr<KernelFunctions> GetKernelFunctions(const CudaDriver& driver, CUmodule module,
                                                   const std::vector<std::string>& entries);

// Allows what the resolved launches need beyond the defaults: more than 48 KiB of dynamic
// shared memory, clusters of more than 8 blocks. Call it before launching and outside any
// CUDA-graph capture. `shared_limit` is the device's opt-in maximum per block; a launch asking
// for more is InvalidArgument.
absl::Status PrepareKernelFunctions(const CudaDriver& driver, const ResolvedPlan& plan,
                                    const KernelFunctions& functions, int64_t shared_limit);

// Sets the fields of `args` the launcher derives from its tensors: shape_key and data.
void SetLauncherFields(KfArgs* args);

// Launches every launch of `plan` in order on `stream` with `args` as the one kernel
// parameter, its launcher fields set; when the call is the plan's captured one (its shape key
// and alignment), a launch's captured entry instead, with KfCapturedArgs (args->data). No
// synchronization and no host copies, so it can be captured into a CUDA graph. An error names
// the launch, its configuration and the driver's reason.
absl::Status LaunchKernels(const CudaDriver& driver, const ResolvedPlan& plan,
                           const KernelFunctions& functions, CUstream stream, KfArgs* args);

}  // namespace kforge
