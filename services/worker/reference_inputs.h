// Fresh validation inputs: random tensors of a target's signature whose values match the
// captured real inputs' ranges, and the held-out shape of a shape-generic target.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kforge {

// One input set like `captured` (same device, dtypes and stride layout), drawn from a
// generator of that device seeded with `seed`:
//   floating: normal with the captured finite values' mean and std, clipped to their
//     [min, max]; a constant input (std 0) is spread to N(mean, max(|mean|, 1)) so a kernel
//     that ignores it is caught; non-finite values (-inf masks) stay where they were when
//     the shape is unchanged;
//   integer: uniform over the captured [min, max] (indices stay in range);
//   bool: true with the captured frequency, kept within [0.1, 0.9].
// `sizes`, when non-empty, gives each input's sizes (held-out shape); layouts keep the
// captured dimension order. An input whose elements overlap (stride 0) keeps its strides in
// its captured shape: random values fill the storage its elements span.
std::vector<at::Tensor> DrawRandomInputs(const std::vector<at::Tensor>& captured, uint64_t seed,
                                         const std::vector<std::vector<int64_t>>& sizes = {});

// Copies `src` into `dst` of the same sizes and strides, also where their elements overlap (an
// expanded view, a head repeated by stride 0): then the storage the elements span is copied,
// as copy_ refuses an overlapping destination.
void CopyLayout(const at::Tensor& dst, const at::Tensor& src);
// A copy of `t` on `device` with t's sizes and strides (CopyLayout).
at::Tensor CopyWithLayout(const at::Tensor& t, c10::Device device);

// The held-out shape of a shape-generic target: the leading dimension d of the first
// highest-rank input whose d is not 1 (d = 1 when none is) becomes d + max(1, d / 3) (3 when
// d is 1) in every input of that rank and leading size; inputs that broadcast along it, and
// lower-rank ones, keep theirs. Larger, not smaller: a kernel with the captured size baked in
// then leaves the extra rows unwritten (caught cleanly) instead of writing far out of bounds.
// nullopt when every input is 0-d. `round_to` > 1 rounds the grown size up to a multiple of
// it: for kernels whose plan requires vectors to tile a dimension the growth spans (a
// reduction over the whole tensor), where the odd size is outside the kernel's domain.
std::optional<std::vector<std::vector<int64_t>>> HeldOutSizes(
    const std::vector<at::Tensor>& captured, int64_t round_to = 1);

}  // namespace kforge
