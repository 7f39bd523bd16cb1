// kforge runtime: the public C++ interface of libkforge_runtime.so, the library that runs the
// kernels of a kforge bundle inside a TorchScript model (guarded dispatch). Loading the library
// registers the kforge:: operators the exported model.pt calls; torch::jit::load then runs it:
//
//   kforge::runtime::LoadBundle("/path/to/export");                 // verifies checksums
//   torch::jit::Module model = torch::jit::load("/path/to/export/model.pt", torch::kCUDA);
//
// Link with -lkforge_runtime (the call above keeps the library linked). Python reaches the
// same functions as torch.ops.kforge.load_bundle / fallback_counts / launch_counts /
// reset_counts after torch.ops.load_library("libkforge_runtime.so").
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kforge::runtime {

// Loads the bundle in `dir`, verifies the sha256 of every file its manifest lists and makes
// it the bundle used for its id (overriding the path recorded in model.pt and
// KFORGE_BUNDLE_DIR). Returns the bundle id (sha256 of manifest.json). Throws c10::Error
// (a std::exception) naming the file when one is missing or changed.
std::string LoadBundle(const std::string& dir);

// Fallbacks since the last reset, keyed "reason" (one count per call that fell back, by the
// first listed kernel's reason) and "kernel_id:reason" (per kernel that was considered).
// Reasons: disabled, signature, layout, cpu_tensor, device, requires_grad, dtype, shape,
// stride, alignment, arch_missing, not_loaded_in_capture, load_error, launch_error,
// unknown_kernel.
std::map<std::string, int64_t> FallbackCounts();

// Kernel launches since the last reset, keyed "kernel_id".
std::map<std::string, int64_t> LaunchCounts();

void ResetCounts();

// True when KFORGE_DISABLE is set to anything but "" or "0" (read once, when the library is
// loaded): every kernel is off and each call is counted as "disabled".
bool KernelsDisabled();

}  // namespace kforge::runtime
