// Guard checks of guarded dispatch: whether an exported kernel may run on the tensors of one
// call, and if not, why (the reason the fallback counters record). Pure functions of the
// manifest's guards and the tensors' metadata, so they are unit-tested on CPU tensors.
#pragma once

#include <string_view>

#include <ATen/core/Tensor.h>

#include "runtime/bundle_manifest.h"

namespace kforge::runtime {

enum class FallbackReason {
  kNone,
  kDisabled,      // KFORGE_DISABLE=1
  kArguments,     // an int list the graph computes differs from the kernel's (a reshape's sizes)
  kSignature,     // a different number of tensor inputs than the kernel takes
  kLayout,        // an undefined, sparse or otherwise non-strided input
  kCpuTensor,     // an input on the CPU
  kDevice,        // an input on another device type, or inputs on different GPUs
  kRequiresGrad,  // grad mode on and an input requires grad (kernels have no backward)
  kDtype,
  kShape,
  kStride,
  kAlignment,
  kArchMissing,         // no cubin for this GPU's compute capability
  kNotLoadedInCapture,  // first use inside CUDA-graph capture (module loads cannot be captured)
  kLoadError,           // the driver refused the module or the plan does not resolve here
  kLaunchError,         // cuLaunchKernelEx refused the launch
  kUnknownKernel,       // the graph names a kernel id the bundle lacks
};

// The counter key: "cpu_tensor", "arch_missing", ...
std::string_view ReasonName(FallbackReason reason);

// The first guard of `kernel` that `inputs` fail, in the order of FallbackReason above (the
// device-level arch check is BinaryForDevice's); kNone when every guard holds. The runtime
// always asks for CUDA; `device_type` exists so the guards past the device check can be
// unit-tested on CPU tensors.
FallbackReason CheckGuards(const BundleKernel& kernel, c10::ArrayRef<at::Tensor> inputs,
                           bool grad_enabled, c10::DeviceType device_type = c10::kCUDA);

// The cubin to load on a GPU of compute capability major.minor: the binary of the same major
// with the highest minor <= `minor` (cubins run on later minors of their major only); nullptr
// when there is none. PTX is never JIT-compiled: only binaries compiled at export run.
const KernelBinary* BinaryForDevice(const BundleKernel& kernel, int major, int minor);

}  // namespace kforge::runtime
