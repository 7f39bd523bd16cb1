// CudaDriver through dlopen (see cuda_driver.h).
#include "common/cuda_driver.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  return *fn != nullptr;
}

absl::StatusOr<CudaDriver> Load() {
  // RTLD_NOLOAD first: a process that links libcuda (kforge-evaluator) shares its copy.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver (libcuda.so.1) cannot be loaded: ", why ? why : "not found",
                     "; install the NVIDIA driver or run on a machine with a GPU"));
  }
  CudaDriver d;
  std::string missing;
  Resolve(lib, "cuInit", &d.init, &missing);
  Resolve(lib, "cuGetErrorName", &d.get_error_name, &missing);
  Resolve(lib, "cuGetErrorString", &d.get_error_string, &missing);
  Resolve(lib, "cuDeviceGet", &d.device_get, &missing);
  Resolve(lib, "cuDeviceGetAttribute", &d.device_get_attribute, &missing);
  Resolve(lib, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain, &missing);
  Resolve(lib, "cuCtxGetCurrent", &d.ctx_get_current, &missing);
  Resolve(lib, "cuCtxSetCurrent", &d.ctx_set_current, &missing);
  Resolve(lib, "cuModuleLoadData", &d.module_load_data, &missing);
  Resolve(lib, "cuModuleUnload", &d.module_unload, &missing);
  Resolve(lib, "cuModuleGetFunction", &d.module_get_function, &missing);
  Resolve(lib, "cuFuncSetAttribute", &d.func_set_attribute, &missing);
  Resolve(lib, "cuFuncGetAttribute", &d.func_get_attribute, &missing);
  Resolve(lib, "cuLaunchKernelEx", &d.launch_kernel_ex, &missing);
  Resolve(lib, "cuStreamIsCapturing", &d.stream_is_capturing, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA driver (libcuda.so.1) lacks ", missing,
        "; kforge needs a driver for CUDA 12.0 or newer"));
  }
  CUresult r = d.init(0);
  if (r != CUDA_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver does not initialize: ", d.Describe(r)));
  }
  return d;
}

}  // namespace

absl::StatusOr<const CudaDriver*> CudaDriver::Get() {
  // Loaded once; a failure is remembered too (the driver will not appear later).
  static const absl::StatusOr<CudaDriver>* loaded = new absl::StatusOr<CudaDriver>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string CudaDriver::Describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out = (get_error_name != nullptr && get_error_name(r, &name) == CUDA_SUCCESS && name)
                        ? std::string(name)
                        : absl::StrCat("CUresult ", static_cast<int>(r));
  if (get_error_string != nullptr && get_error_string(r, &text) == CUDA_SUCCESS && text) {
    absl::StrAppend(&out, " (", text, ")");
  }
  return out;
}

}  // namespace kforge
