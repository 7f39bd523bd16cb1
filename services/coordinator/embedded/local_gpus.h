// LocalGpuCount: how many CUDA GPUs this process can see, asked of the driver through dlopen so
// that kforge runs (compile-only) where libcuda is absent.
#pragma once

#include <string>

namespace kforge {

struct LocalGpus {
  int count = 0;
  // Why none are usable when count is 0: no driver library, cuInit failed, no device.
  std::string why_none;
};

// Honours CUDA_VISIBLE_DEVICES (the driver does). Cached after the first call.
LocalGpus FindLocalGpus();

}  // namespace kforge
