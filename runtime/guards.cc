// Guard checks (see guards.h).
#include "runtime/guards.h"

#include <cstdint>
#include <string>

#include "common/kforge_device.h"

namespace kforge::runtime {
namespace {

const char* DtypeName(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return "";
  }
}

bool ParseArch(const std::string& arch, int* major, int* minor) {
  // "sm_90" -> 9.0, "sm_100" -> 10.0, "sm_120" -> 12.0: the last digit is the minor.
  if (arch.size() < 5 || arch.rfind("sm_", 0) != 0) return false;
  int value = 0;
  for (size_t i = 3; i < arch.size(); ++i) {
    if (arch[i] < '0' || arch[i] > '9') return false;
    value = value * 10 + (arch[i] - '0');
  }
  *major = value / 10;
  *minor = value % 10;
  return true;
}

}  // namespace

std::string_view ReasonName(FallbackReason reason) {
  switch (reason) {
    case FallbackReason::kNone: return "none";
    case FallbackReason::kDisabled: return "disabled";
    case FallbackReason::kArguments: return "arguments";
    case FallbackReason::kSignature: return "signature";
    case FallbackReason::kLayout: return "layout";
    case FallbackReason::kCpuTensor: return "cpu_tensor";
    case FallbackReason::kDevice: return "device";
    case FallbackReason::kRequiresGrad: return "requires_grad";
    case FallbackReason::kDtype: return "dtype";
    case FallbackReason::kShape: return "shape";
    case FallbackReason::kStride: return "stride";
    case FallbackReason::kAlignment: return "alignment";
    case FallbackReason::kArchMissing: return "arch_missing";
    case FallbackReason::kNotLoadedInCapture: return "not_loaded_in_capture";
    case FallbackReason::kLoadError: return "load_error";
    case FallbackReason::kLaunchError: return "launch_error";
    case FallbackReason::kUnknownKernel: return "unknown_kernel";
  }
  return "unknown";
}

FallbackReason CheckGuards(const BundleKernel& kernel, c10::ArrayRef<at::Tensor> inputs,
                           bool grad_enabled, c10::DeviceType device_type) {
  if (inputs.size() != kernel.inputs.size()) return FallbackReason::kSignature;
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || t.layout() != c10::kStrided) return FallbackReason::kLayout;
  }
  for (const at::Tensor& t : inputs) {
    if (t.device().type() != device_type) {
      return t.is_cpu() ? FallbackReason::kCpuTensor : FallbackReason::kDevice;
    }
  }
  for (const at::Tensor& t : inputs) {
    if (t.device() != inputs[0].device()) return FallbackReason::kDevice;
  }
  if (grad_enabled) {
    for (const at::Tensor& t : inputs) {
      if (t.requires_grad()) return FallbackReason::kRequiresGrad;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (kernel.inputs[i].dtype != DtypeName(inputs[i].scalar_type())) return FallbackReason::kDtype;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].sizes() != c10::IntArrayRef(kernel.inputs[i].sizes)) return FallbackReason::kShape;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const TensorGuard& g = kernel.inputs[i];
    // A dim of size 1 (or an empty tensor) has no meaningful stride; every other dim must
    // have the stride the kernel was validated with.
    if (t.numel() > 0) {
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (t.size(d) > 1 && t.stride(d) != g.strides[d]) return FallbackReason::kStride;
      }
    }
    if (g.contiguous && !t.is_contiguous()) return FallbackReason::kStride;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto address = reinterpret_cast<uintptr_t>(inputs[i].const_data_ptr());
    if (address % static_cast<uintptr_t>(kernel.inputs[i].alignment_bytes) != 0) {
      return FallbackReason::kAlignment;
    }
  }
  return FallbackReason::kNone;
}

const KernelBinary* BinaryForDevice(const BundleKernel& kernel, int major, int minor) {
  const KernelBinary* best = nullptr;
  int best_minor = -1;
  for (const KernelBinary& b : kernel.binaries) {
    int bmajor = 0, bminor = 0;
    if (!ParseArch(b.arch, &bmajor, &bminor)) continue;
    if (bmajor == major && bminor <= minor && bminor > best_minor) {
      best = &b;
      best_minor = bminor;
    }
  }
  return best;
}

}  // namespace kforge::runtime
