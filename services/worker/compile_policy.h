// What the worker agrees to compile: limits and refusals applied to a candidate's source and
// options before NVRTC sees them, and the NVRTC flags built from accepted options. Sources
// come from an LLM, so everything here assumes hostile input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

inline constexpr size_t kMaxSourceBytes = 256 * 1024;

// OK, or InvalidArgument whose message says what was refused and why: empty or oversized
// source, invalid UTF-8, NUL bytes, dynamic parallelism (device-side launches: `<<<`,
// cudaLaunchDevice, cudaGetParameterBuffer, ...), #include of anything but a plain relative
// header name (no absolute paths, "..", or macro-expanded operands).
absl::Status CheckSourcePolicy(std::string_view source);

// OK, or InvalidArgument: arch not of the form sm_NN[a|f], max_registers outside 16..255, an
// extra flag outside the allow-list (-rdc, -dc, include paths and the like are refused).
// `options.arch` must already be filled in.
absl::Status CheckCompileOptions(const v1::CompileOptions& options);

// The NVRTC option list for accepted options: arch, C++17, ptxas -v (for the resource
// report), fast math, register cap, the extra flags, and the CUDA include directory.
std::vector<std::string> NvrtcFlags(const v1::CompileOptions& options,
                                    const std::string& cuda_include_dir);

// Byte offset of the first invalid UTF-8 sequence, or npos when `text` is valid.
size_t FindInvalidUtf8(std::string_view text);

// CRLF -> LF and a final newline: sources that differ only there compile identically and
// share a cache entry.
std::string CanonicalSource(std::string_view source);

}  // namespace kforge
