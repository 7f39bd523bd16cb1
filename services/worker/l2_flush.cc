#include "services/worker/l2_flush.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sum.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kforge {

absl::StatusOr<L2Flush> L2Flush::Create(int64_t l2_bytes) {
  const int64_t bytes = std::max<int64_t>(2 * l2_bytes, 8 << 20);
  L2Flush flush;
  try {
    const auto on_gpu = at::TensorOptions().device(at::kCUDA);
    flush.written_ = at::empty({bytes}, on_gpu.dtype(at::kByte));
    flush.read_ = at::ones({bytes / 4}, on_gpu.dtype(at::kFloat));
    flush.read_sum_ = at::empty({}, flush.read_.options());
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the L2 flush's buffers (2 x ",
                                                     bytes,
                                                     " bytes): ", e.what_without_backtrace()));
  }
  return flush;
}

absl::Status L2Flush::Enqueue() {
  try {
    written_.fill_(static_cast<int64_t>(++value_));
    at::sum_out(read_sum_, read_);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("L2 flush failed: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

}  // namespace kforge
