// One NVRTC compile in the current process: what the kforge-nvrtc child runs. The worker
// itself never calls this (a compile bomb must not take the server down); it goes through
// Compiler, which runs the child under limits.
#pragma once

#include <string>
#include <string_view>

#include "kforge/v1/common.pb.h"

namespace kforge {

// The kernel ABI header (common/kforge_device.h), embedded at build time; candidates include
// it as "kforge_device.h".
std::string_view KforgeDeviceHeader();

// "nvrtc 13.0".
std::string NvrtcVersionString();

// Space-separated "sm_75 sm_80 ..." that this NVRTC can compile for.
std::string NvrtcSupportedArchs();

// Compiles `source` (already accepted by CheckSourcePolicy) with `options` (accepted by
// CheckCompileOptions, arch filled in). Status OK with cubin, PTX, log and the resource
// report, or FAILED with the log, or RESOURCE_LIMIT when NVRTC ran out of memory.
v1::CompileResult CompileWithNvrtc(std::string_view source, const v1::CompileOptions& options,
                                   const std::string& cuda_include_dir);

}  // namespace kforge
