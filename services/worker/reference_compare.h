// Accuracy and integrity checks of candidate outputs against the float64 reference:
// tolerance per dtype, error statistics, the "as accurate as PyTorch" rule, and bit-level
// searches for poison left in outputs and for runs that disagree.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace kforge {

// Element-wise allowance |candidate - reference| <= atol + rtol * |reference|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// Tight per-dtype tolerances: float32 1e-5/1e-5, float16 1e-3/1e-3, bfloat16 8e-3/8e-3,
// float64 1e-12/1e-12; integers and bool must match exactly (0/0).
Tolerance DtypeTolerance(at::ScalarType dtype);

struct ErrorStats {
  int64_t numel = 0;
  double max_abs = 0;  // over elements finite in both
  double max_rel = 0;  // |c - r| / |r| over elements finite in both with r != 0
  // max |c - r| / (atol + rtol * |r|): 1.0 is the edge of the dtype tolerance; for exact
  // dtypes any difference is +inf.
  double max_normalized = 0;
  int64_t worst_index = -1;  // row-major index of max_normalized
  double worst_output = 0;
  double worst_reference = 0;
  // First row-major index where NaN/inf disagree with the reference (NaN where it is finite,
  // a finite value where it is inf, ...), -1 if none.
  int64_t nonfinite_index = -1;
};

// Statistics of `output` against `reference` (any dtypes and devices; compared in float64).
// When `excuse` is defined (eager's output), a non-finite disagreement that `excuse` shares
// bit for bit (or both NaN) is not counted: an fp16 op may overflow where PyTorch does too.
ErrorStats MeasureError(const at::Tensor& output, const at::Tensor& reference, Tolerance tol,
                        const at::Tensor& excuse = at::Tensor());

struct AccuracyJudgement {
  bool pass = false;
  double allowed = 0;  // allowed max_normalized: max(1, k * eager's max_normalized)
  std::string message;
};

// The validation rule: a candidate passes when it has no non-finite disagreement and its
// max_normalized error is within max(1, k * eager's).
AccuracyJudgement JudgeAccuracy(const ErrorStats& candidate, const ErrorStats& eager,
                                double eager_error_factor, Tolerance tol);

// `t` reinterpreted as the signed integer type of its element width (bit-level view).
at::Tensor BitView(const at::Tensor& t);

// Overwrites every element of `t` with the bit pattern `bits` (low bytes of its width).
void FillBits(const at::Tensor& t, uint64_t bits);

// Row-major index of the first element whose bits are `bits`, -1 if none.
int64_t FindBits(const at::Tensor& t, uint64_t bits);

// Row-major index of the first element holding `bits` where `reference` is finite: poison the
// kernel left in place (poison A of a floating type is a NaN, so a finite reference means the
// element should have been written). -1 if none.
int64_t FindPoisonWhereFinite(const at::Tensor& output, uint64_t bits,
                              const at::Tensor& reference);

// Row-major index of the first element that holds `bits_a` in `run_a` and `bits_b` in
// `run_b`: an element the kernel did not write in either run. -1 if none.
int64_t FindUnwritten(const at::Tensor& run_a, uint64_t bits_a, const at::Tensor& run_b,
                      uint64_t bits_b);

// Row-major index of the first element whose bits differ between `a` and `b`, -1 if none.
int64_t FindBitDifference(const at::Tensor& a, const at::Tensor& b);

}  // namespace kforge
