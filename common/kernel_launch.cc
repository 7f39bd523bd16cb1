// Kernel launches through the driver API (see kernel_launch.h).
#include "common/kernel_launch.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/shape_key.h"

namespace kforge {
namespace {

constexpr int64_t kDefaultSharedLimit = 48 * 1024;

// KFORGE_EARLY_START=0 launches every early_start launch after the one before it, as usual
// (to measure what overlapping them gains, or to rule it out).
bool EarlyStartEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("KFORGE_EARLY_START");
    return value == nullptr || std::string(value) != "0";
  }();
  return enabled;
}

// Whether `function` was compiled for compute capability 9.0 or newer (its virtual
// architecture: PTX for compute_80 JIT-compiled on an H100 is 80): then the device supports
// programmatic launches and the kernel's `#if __CUDA_ARCH__ >= 900` waits were compiled in.
bool CompiledForSm90(const CudaDriver& driver, CUfunction function) {
  int version = 0;
  return driver.func_get_attribute(&version, CU_FUNC_ATTRIBUTE_PTX_VERSION, function) ==
             CUDA_SUCCESS &&
         version >= 90;
}

}  // namespace

KfTensor MakeKfTensor(void* data, int dtype, const int64_t* sizes, const int64_t* strides,
                      int ndim) {
  KfTensor k;
  std::memset(&k, 0, sizeof(k));
  k.data = data;
  k.ndim = ndim;
  k.dtype = dtype;
  long long numel = 1;
  for (int d = 0; d < KF_MAX_DIMS; ++d) {
    k.sizes[d] = d < ndim ? sizes[d] : 1;
    k.strides[d] = d < ndim ? strides[d] : 0;
    if (d < ndim) numel *= sizes[d];
  }
  k.numel = numel;
  return k;
}

absl::StatusOr<KernelFunctions> GetKernelFunctions(const CudaDriver& driver, CUmodule module,
                                                   const std::vector<std::string>& entries) {
  KernelFunctions functions;
  for (const std::string& entry : entries) {
    CUfunction f = nullptr;
    CUresult r = driver.module_get_function(&f, module, entry.c_str());
    if (r != CUDA_SUCCESS) {
      return absl::InvalidArgumentError(
          absl::StrCat("the launch plan names entry point '", entry,
                       "', which the cubin lacks (", driver.Describe(r),
                       "); declare it extern \"C\" __global__"));
    }
    functions[entry] = {f, EarlyStartEnabled() && CompiledForSm90(driver, f)};
  }
  return functions;
}

namespace {

// What `launch` needs of the function `entry` (its entry or captured entry) beyond the
// defaults.
absl::Status PrepareFunction(const CudaDriver& driver, const ResolvedLaunch& launch,
                             const std::string& entry, const KernelFunctions& functions) {
  auto it = functions.find(entry);
  if (it == functions.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch plan entry point '", entry, "' was not loaded"));
  }
  if (launch.shared_bytes > kDefaultSharedLimit) {
    CUresult r = driver.func_set_attribute(it->second.function,
                                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(launch.shared_bytes));
    if (r != CUDA_SUCCESS) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allow ", launch.shared_bytes,
                       " bytes of dynamic shared memory for ", entry, ": ",
                       driver.Describe(r)));
    }
  }
  if (launch.cluster && launch.cluster->Product() > 8) {
    CUresult r = driver.func_set_attribute(
        it->second.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat("cluster of ", launch.cluster->Product(),
                                                     " blocks for ", entry,
                                                     " refused: ", driver.Describe(r)));
    }
  }
  return absl::OkStatus();
}

// Whether a call, its launcher fields set, is `captured`: its shape key, and every pointer
// aligned as the captured entries assume.
bool IsCapturedCall(const CapturedCall& captured, const KfArgs& args) {
  uintptr_t low_bits = 0;
  for (const void* p : args.data) low_bits |= reinterpret_cast<uintptr_t>(p);
  return args.shape_key == captured.shape_key &&
         (low_bits & static_cast<uintptr_t>(captured.alignment_bytes - 1)) == 0;
}

}  // namespace

absl::Status PrepareKernelFunctions(const CudaDriver& driver, const ResolvedPlan& plan,
                                    const KernelFunctions& functions, int64_t shared_limit) {
  for (const ResolvedLaunch& launch : plan.launches) {
    if (launch.shared_bytes > shared_limit) {
      return absl::InvalidArgumentError(
          absl::StrFormat("launch of %s asks for %d bytes of dynamic shared memory; this GPU "
                          "allows %d per block",
                          launch.entry, launch.shared_bytes, shared_limit));
    }
    for (const std::string* entry : {&launch.entry, &launch.captured_entry}) {
      if (entry->empty()) continue;
      if (absl::Status s = PrepareFunction(driver, launch, *entry, functions); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

void SetLauncherFields(KfArgs* args) {
  args->shape_key = KfShapeKey(*args);
  for (int i = 0; i < KF_MAX_INPUTS; ++i) args->data[i] = args->inputs[i].data;
  for (int i = 0; i < KF_MAX_OUTPUTS; ++i) args->data[KF_MAX_INPUTS + i] = args->outputs[i].data;
  args->data[KF_SCRATCH_SLOT] = args->scratch.data;
}

absl::Status LaunchKernels(const CudaDriver& driver, const ResolvedPlan& plan,
                           const KernelFunctions& functions, CUstream stream, KfArgs* args) {
  SetLauncherFields(args);
  const bool captured_call = plan.captured && IsCapturedCall(*plan.captured, *args);
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const ResolvedLaunch& launch = plan.launches[i];
    const bool captured = captured_call && !launch.captured_entry.empty();
    const std::string& entry = captured ? launch.captured_entry : launch.entry;
    auto it = functions.find(entry);
    if (it == functions.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch plan entry point '", entry, "' was not loaded"));
    }
    CUlaunchConfig config;
    std::memset(&config, 0, sizeof(config));
    config.gridDimX = static_cast<unsigned>(launch.grid.x);
    config.gridDimY = static_cast<unsigned>(launch.grid.y);
    config.gridDimZ = static_cast<unsigned>(launch.grid.z);
    config.blockDimX = static_cast<unsigned>(launch.block.x);
    config.blockDimY = static_cast<unsigned>(launch.block.y);
    config.blockDimZ = static_cast<unsigned>(launch.block.z);
    config.sharedMemBytes = static_cast<unsigned>(launch.shared_bytes);
    config.hStream = stream;
    CUlaunchAttribute attrs[2];
    std::memset(attrs, 0, sizeof(attrs));
    if (launch.cluster) {
      CUlaunchAttribute& a = attrs[config.numAttrs++];
      a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      a.value.clusterDim.x = static_cast<unsigned>(launch.cluster->x);
      a.value.clusterDim.y = static_cast<unsigned>(launch.cluster->y);
      a.value.clusterDim.z = static_cast<unsigned>(launch.cluster->z);
    } else if (launch.cooperative) {
      // The driver refuses a grid whose blocks cannot all be resident at once, instead of
      // letting blocks that wait on each other hang.
      CUlaunchAttribute& a = attrs[config.numAttrs++];
      a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      a.value.cooperative = 1;
    }
    if (launch.early_start && it->second.early_start) {
      // Programmatic dependent launch: the grid may be scheduled while the one before it
      // drains; the kernel waits (griddepcontrol.wait) before reading what that one wrote.
      // Code for an older GPU has no such wait, and runs after the launch before it as usual.
      CUlaunchAttribute& a = attrs[config.numAttrs++];
      a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      a.value.programmaticStreamSerializationAllowed = 1;
    }
    config.attrs = attrs;
    // The struct travels by value: the driver copies it at launch (and at capture). A
    // captured entry's KfCapturedArgs is KfArgs::data, which lies in KfArgs as one array.
    void* params[] = {captured ? static_cast<void*>(args->data) : static_cast<void*>(args)};
    CUresult r = driver.launch_kernel_ex(&config, it->second.function, params, nullptr);
    if (r != CUDA_SUCCESS) {
      return absl::InternalError(absl::StrFormat(
          "launch %d (%s, grid %dx%dx%d, block %dx%dx%d, %d bytes of shared memory) was "
          "refused: %s",
          i, entry, launch.grid.x, launch.grid.y, launch.grid.z, launch.block.x,
          launch.block.y, launch.block.z, launch.shared_bytes,
          r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
              ? absl::StrCat(driver.Describe(r),
                             " (a cooperative launch's blocks must all fit on the GPU at once)")
              : driver.Describe(r)));
    }
  }
  return absl::OkStatus();
}

}  // namespace kforge
