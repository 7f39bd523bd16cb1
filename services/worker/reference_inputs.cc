// Random validation inputs matched to the captured inputs' value ranges.
#include "services/worker/reference_inputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>

namespace kforge {
namespace {

// Elements of storage that `sizes` and `strides` (none negative) reach: 0 when empty.
int64_t StorageSpan(at::IntArrayRef sizes, at::IntArrayRef strides) {
  int64_t span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    span += (sizes[d] - 1) * strides[d];
  }
  return span;
}

bool Overlaps(const at::Tensor& t) {
  return at::has_internal_overlap(t) != at::MemOverlap::No;
}

// Dense strides for `sizes` that keep the dimension order of `like` (sorted by its strides,
// largest outermost), so a channels-last or transposed input stays so.
std::vector<int64_t> DenseStridesLike(const at::Tensor& like, at::IntArrayRef sizes) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  if (like.dim() == ndim && !like.is_contiguous()) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  }
  std::vector<int64_t> strides(ndim, 1);
  int64_t running = 1;
  for (int64_t k = ndim - 1; k >= 0; --k) {
    strides[order[k]] = running;
    running *= std::max<int64_t>(sizes[order[k]], 1);
  }
  return strides;
}

at::Tensor DrawLike(const at::Tensor& captured, at::IntArrayRef captured_sizes, bool same_shape,
                    at::Generator& gen) {
  const at::ScalarType dtype = captured.scalar_type();
  // An overlapping layout in its captured shape: values for the storage it spans, viewed as
  // the capture was.
  const bool overlap = same_shape && Overlaps(captured);
  const std::vector<int64_t> span_sizes = {StorageSpan(captured.sizes(), captured.strides())};
  const at::IntArrayRef sizes = overlap ? at::IntArrayRef(span_sizes) : captured_sizes;
  const auto f64 = at::TensorOptions().dtype(at::kDouble).device(captured.device());
  at::Tensor values;
  if (captured.numel() == 0) {
    values = at::empty(sizes, f64);
  } else if (at::isFloatingType(dtype)) {
    at::Tensor finite_mask = at::isfinite(captured);
    at::Tensor finite = at::masked_select(captured, finite_mask).to(at::kDouble);
    if (finite.numel() == 0) {
      values = at::full(sizes, 0.0, f64);
    } else {
      double mean = finite.mean().item<double>();
      double std = finite.numel() > 1 ? finite.std(/*unbiased=*/false).item<double>() : 0.0;
      double lo = finite.min().item<double>();
      double hi = finite.max().item<double>();
      if (!(std > 0)) {
        std = std::max(std::fabs(mean), 1.0);
        lo = mean - 4 * std;
        hi = mean + 4 * std;
      }
      values = at::randn(sizes, gen, f64).mul_(std).add_(mean).clamp_(lo, hi);
      if (same_shape && !overlap && !finite_mask.all().item<bool>()) {
        values = at::where(finite_mask, values, captured.to(at::kDouble));
      }
    }
  } else if (dtype == at::kBool) {
    double p = captured.to(at::kDouble).mean().item<double>();
    p = std::clamp(p, 0.1, 0.9);
    values = at::rand(sizes, gen, f64).lt(p);
  } else {
    at::Tensor as_long = captured.to(at::kLong);
    int64_t lo = as_long.min().item<int64_t>();
    int64_t hi = as_long.max().item<int64_t>();
    values = at::randint(lo, hi + 1, sizes, gen, f64.dtype(at::kLong));
  }
  const auto options = at::TensorOptions().dtype(dtype).device(captured.device());
  if (overlap) {
    return values.to(options).as_strided(captured.sizes(), captured.strides());
  }
  at::Tensor out = same_shape ? at::empty_strided(sizes, captured.strides(), options)
                              : at::empty_strided(sizes, DenseStridesLike(captured, sizes),
                                                  options);
  out.copy_(values);
  return out;
}

}  // namespace

std::vector<at::Tensor> DrawRandomInputs(const std::vector<at::Tensor>& captured, uint64_t seed,
                                         const std::vector<std::vector<int64_t>>& sizes) {
  // A private generator on the inputs' device: drawing on the GPU keeps large targets fast.
  c10::Device device(at::kCPU);
  for (const at::Tensor& c : captured) {
    if (c.defined()) {
      device = c.device();
      break;
    }
  }
  at::Generator gen = device.is_cpu()
                          ? at::make_generator<at::CPUGeneratorImpl>(seed)
                          : at::globalContext().defaultGenerator(device).clone();
  gen.set_current_seed(seed);
  std::vector<at::Tensor> out;
  out.reserve(captured.size());
  for (size_t i = 0; i < captured.size(); ++i) {
    const at::Tensor& c = captured[i];
    if (!c.defined()) {
      out.push_back(c);
      continue;
    }
    bool override = i < sizes.size();
    at::IntArrayRef shape = override ? at::IntArrayRef(sizes[i]) : c.sizes();
    bool same_shape = shape.equals(c.sizes());
    out.push_back(DrawLike(c, shape, same_shape, gen));
  }
  return out;
}

void CopyLayout(const at::Tensor& dst, const at::Tensor& src) {
  if (!Overlaps(src)) {
    dst.copy_(src);
    return;
  }
  const int64_t span = StorageSpan(src.sizes(), src.strides());
  dst.as_strided({span}, {1}).copy_(src.as_strided({span}, {1}));
}

at::Tensor CopyWithLayout(const at::Tensor& t, c10::Device device) {
  // The storage t's elements span, viewed as t is (dense: exactly its elements).
  at::Tensor out = at::empty({StorageSpan(t.sizes(), t.strides())}, t.options().device(device))
                       .as_strided(t.sizes(), t.strides());
  CopyLayout(out, t);
  return out;
}

std::optional<std::vector<std::vector<int64_t>>> HeldOutSizes(
    const std::vector<at::Tensor>& captured, int64_t round_to) {
  // The leading dimension to grow: that of the first highest-rank input whose leading size is
  // not 1 (1 when none is), so a lower-rank weight put first ([C] * [B,S,C]) or a broadcast
  // input put first ([1,1,S,S] mask + [B,H,S,S] scores) does not grow alone, and a matmul's
  // [M,K] x [K,N] grows M as before.
  int64_t rank = 0;
  for (const at::Tensor& t : captured) {
    if (t.defined()) rank = std::max<int64_t>(rank, t.dim());
  }
  if (rank == 0) return std::nullopt;
  int64_t lead = 1;
  for (const at::Tensor& t : captured) {
    if (t.defined() && t.dim() == rank && t.size(0) != 1) {
      lead = t.size(0);
      break;
    }
  }
  int64_t held_out = lead <= 1 ? 3 : lead + std::max<int64_t>(1, lead / 3);
  if (round_to > 1) held_out = (held_out + round_to - 1) / round_to * round_to;
  std::vector<std::vector<int64_t>> sizes;
  for (const at::Tensor& t : captured) {
    std::vector<int64_t> s = t.defined() ? t.sizes().vec() : std::vector<int64_t>{};
    if (t.defined() && t.dim() == rank && t.size(0) == lead) s[0] = held_out;
    sizes.push_back(std::move(s));
  }
  return sizes;
}

}  // namespace kforge
