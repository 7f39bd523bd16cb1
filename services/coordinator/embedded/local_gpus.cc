// LocalGpuCount through a dlopen'd libcuda (see local_gpus.h).
#include "services/coordinator/embedded/local_gpus.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace kforge {

LocalGpus FindLocalGpus() {
  static const LocalGpus gpus = [] {
    LocalGpus found;
    // Never closed: LibTorch or the driver may hold it for the process's lifetime anyway.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      found.why_none = "no CUDA driver library (libcuda.so.1) on this machine";
      return found;
    }
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    if (init == nullptr || count == nullptr) {
      found.why_none = "the CUDA driver library lacks cuInit/cuDeviceGetCount";
      return found;
    }
    if (int rc = init(0); rc != 0) {
      found.why_none = absl::StrCat("cuInit failed (CUresult ", rc,
                                    "): no usable GPU or the driver does not match");
      return found;
    }
    int n = 0;
    if (int rc = count(&n); rc != 0 || n <= 0) {
      found.why_none = "the CUDA driver reports no GPU (check CUDA_VISIBLE_DEVICES)";
      return found;
    }
    found.count = n;
    return found;
  }();
  return gpus;
}

}  // namespace kforge
