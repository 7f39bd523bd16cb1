#pragma once
// The L2 flush before every timed rep (DESIGN.md, timing method), one for every timing of
// kernels that C++ does (the worker's, the sweep's quick pass; tools/bench/
// torch_compile_times.py does the same in Python): a write of twice L2 evicts what the last
// rep left, then a read of another buffer of twice L2 evicts the written lines, so that the
// timed work starts on a clean L2 and writes none of the flush's lines back. After the write
// alone a timed kernel paid for writing back up to L2's size of the flush's dirty lines: on a
// clean L2 the H100's SD VAE group norms timed 1.8-5.4% shorter, eager 0.6-1.6%
// (docs/benchmarks/2026-12-06-session47.md). Nsight Compute's cache control leaves L2 clean
// too.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kforge {

class L2Flush {
 public:
  // Buffers on the current CUDA device for an L2 of `l2_bytes` (twice it each, at least 8 MB).
  static absl::StatusOr<L2Flush> Create(int64_t l2_bytes);

  // Enqueues the flush on the current CUDA stream (ATen's, as the worker's timing uses).
  absl::Status Enqueue();

 private:
  at::Tensor written_, read_, read_sum_;
  uint8_t value_ = 0;  // a new value per write, so that no write repeats the last one
};

}  // namespace kforge
