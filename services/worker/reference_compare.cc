// Accuracy and integrity checks of candidate outputs (tensor math through ATen, so they run on
// the GPU in the evaluator and on CPU tensors in tests).
#include "services/worker/reference_compare.h"

#include <cmath>
#include <limits>

#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include "absl/strings/str_format.h"

namespace kforge {
namespace {

at::ScalarType BitType(at::ScalarType dtype) {
  switch (c10::elementSize(dtype)) {
    case 8: return at::kLong;
    case 4: return at::kInt;
    case 2: return at::kShort;
    default: return at::kByte;
  }
}

// First true element of a bool tensor in row-major order, -1 if none.
int64_t FirstTrue(const at::Tensor& mask) {
  at::Tensor flat = mask.contiguous().reshape({-1});
  at::Tensor idx = at::nonzero(flat);
  if (idx.size(0) == 0) return -1;
  return idx[0][0].item<int64_t>();
}

// Non-finite disagreement: NaN-ness differs, or an infinity that is not matched exactly.
at::Tensor NonfiniteMismatch(const at::Tensor& c, const at::Tensor& r) {
  at::Tensor c_nan = at::isnan(c), r_nan = at::isnan(r);
  at::Tensor nan_differs = c_nan.ne(r_nan);
  at::Tensor either_nonfinite =
      at::logical_or(at::logical_not(at::isfinite(c)), at::logical_not(at::isfinite(r)));
  at::Tensor inf_differs = at::logical_and(
      at::logical_and(either_nonfinite, at::logical_not(at::logical_or(c_nan, r_nan))),
      c.ne(r));
  return at::logical_or(nan_differs, inf_differs);
}

int64_t WrapSigned(uint64_t bits, int width) {
  switch (width) {
    case 8: return static_cast<int64_t>(bits);
    case 4: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case 2: return static_cast<int16_t>(static_cast<uint16_t>(bits));
    default: return static_cast<uint8_t>(bits);
  }
}

}  // namespace

Tolerance DtypeTolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return {1e-5, 1e-5};
    case at::kHalf: return {1e-3, 1e-3};
    case at::kBFloat16: return {8e-3, 8e-3};
    case at::kDouble: return {1e-12, 1e-12};
    default: return {0, 0};
  }
}

ErrorStats MeasureError(const at::Tensor& output, const at::Tensor& reference, Tolerance tol,
                        const at::Tensor& excuse) {
  ErrorStats stats;
  stats.numel = output.numel();
  if (stats.numel == 0) return stats;
  at::Tensor c = output.to(at::kDouble).contiguous().reshape({-1});
  at::Tensor r = reference.to(c.device(), at::kDouble).contiguous().reshape({-1});
  at::Tensor bad = NonfiniteMismatch(c, r);
  if (excuse.defined()) {
    at::Tensor e = excuse.to(c.device(), at::kDouble).contiguous().reshape({-1});
    at::Tensor same = at::logical_or(c.eq(e), at::logical_and(at::isnan(c), at::isnan(e)));
    bad = at::logical_and(bad, at::logical_not(at::logical_and(NonfiniteMismatch(e, r), same)));
  }
  stats.nonfinite_index = FirstTrue(bad);

  at::Tensor finite = at::logical_and(at::isfinite(c), at::isfinite(r));
  at::Tensor zero = at::zeros_like(c);
  at::Tensor diff = at::where(finite, at::abs(c - r), zero);
  at::Tensor abs_r = at::where(finite, at::abs(r), zero);
  stats.max_abs = diff.max().item<double>();
  at::Tensor rel = at::where(abs_r.gt(0), diff / at::where(abs_r.gt(0), abs_r, c.new_ones({})),
                             zero);
  stats.max_rel = rel.max().item<double>();
  at::Tensor normalized;
  if (tol.atol == 0 && tol.rtol == 0) {
    normalized = at::where(diff.gt(0), c.new_full({}, std::numeric_limits<double>::infinity()),
                           zero);
  } else {
    normalized = diff / (abs_r * tol.rtol + tol.atol);
  }
  int64_t worst = at::argmax(normalized).item<int64_t>();
  stats.max_normalized = normalized[worst].item<double>();
  stats.worst_index = worst;
  stats.worst_output = c[worst].item<double>();
  stats.worst_reference = r[worst].item<double>();
  return stats;
}

AccuracyJudgement JudgeAccuracy(const ErrorStats& candidate, const ErrorStats& eager,
                                double eager_error_factor, Tolerance tol) {
  AccuracyJudgement j;
  double eager_scaled = eager_error_factor * eager.max_normalized;
  j.allowed = std::isfinite(eager_scaled) ? std::max(1.0, eager_scaled) : 1.0;
  if (candidate.nonfinite_index >= 0) {
    j.pass = false;
    j.message = absl::StrFormat(
        "element %d is NaN or infinite where the float64 reference is not (or the reverse)",
        candidate.nonfinite_index);
    return j;
  }
  j.pass = candidate.max_normalized <= j.allowed;
  if (!j.pass) {
    j.message = absl::StrFormat(
        "max error at element %d: output %.9g vs float64 reference %.9g (abs %.3g, rel %.3g); "
        "allowed |err| <= %.3g x (%.1e + %.1e x |ref|), where %.3g is max(1, %.3g x eager's "
        "own normalized error %.3g); error/allowance here is %.3g",
        candidate.worst_index, candidate.worst_output, candidate.worst_reference,
        candidate.max_abs, candidate.max_rel, j.allowed, tol.atol, tol.rtol, j.allowed,
        eager_error_factor, eager.max_normalized, candidate.max_normalized);
  }
  return j;
}

at::Tensor BitView(const at::Tensor& t) { return t.view(BitType(t.scalar_type())); }

void FillBits(const at::Tensor& t, uint64_t bits) {
  int width = static_cast<int>(t.element_size());
  BitView(t).fill_(WrapSigned(bits, width));
}

int64_t FindBits(const at::Tensor& t, uint64_t bits) {
  int width = static_cast<int>(t.element_size());
  return FirstTrue(BitView(t).eq(WrapSigned(bits, width)));
}

int64_t FindPoisonWhereFinite(const at::Tensor& output, uint64_t bits,
                              const at::Tensor& reference) {
  int width = static_cast<int>(output.element_size());
  at::Tensor finite = at::isfinite(reference.to(output.device()));
  return FirstTrue(at::logical_and(BitView(output).eq(WrapSigned(bits, width)), finite));
}

int64_t FindUnwritten(const at::Tensor& run_a, uint64_t bits_a, const at::Tensor& run_b,
                      uint64_t bits_b) {
  int width = static_cast<int>(run_a.element_size());
  return FirstTrue(at::logical_and(BitView(run_a).eq(WrapSigned(bits_a, width)),
                                   BitView(run_b).eq(WrapSigned(bits_b, width))));
}

int64_t FindBitDifference(const at::Tensor& a, const at::Tensor& b) {
  return FirstTrue(BitView(a).ne(BitView(b)));
}

}  // namespace kforge
