// CudaDriver: the CUDA driver entry points kforge's kernel launches use, resolved from
// libcuda.so.1 with dlopen at first use. The runtime library is loaded into users' processes
// and the kforge binary runs on machines without a GPU, so libcuda is never a link dependency
// of either; where the driver is absent, Get() says so and nothing else fails.
#pragma once

#include <cuda.h>

#include <string>

#include "absl/status/statusor.h"

namespace kforge {

struct CudaDriver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&::cuFuncGetAttribute) func_get_attribute = nullptr;
  decltype(&::cuLaunchKernelEx) launch_kernel_ex = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;

  // The process-wide table, loaded and cuInit'ed once. FailedPrecondition naming libcuda
  // and the reason when there is no usable driver.
  static absl::StatusOr<const CudaDriver*> Get();

  // "CUDA_ERROR_INVALID_VALUE (invalid argument)" for `r`.
  std::string Describe(CUresult r) const;
};

}  // namespace kforge
