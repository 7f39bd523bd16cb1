// The quick pass's accuracy check, made cheap enough to run on every config of an exhaustive
// sweep. MeasureError makes ~20 passes over float64 copies of the output (NaN bookkeeping,
// relative error, argmax); on the 268M-element softmax row that is ~25 ms per config, longer
// than timing it. QuickAccuracy precomputes the reference's tolerance denominators once per
// target and judges a kernel's output with four passes (to float64, |c - r|, / denominator,
// max). When that says PASS the verdict and max_normalized are exactly what
// JudgeAccuracy(MeasureError(...)) gives (the same float64 operations, in the same order, on
// all-finite data); anything else (a failure, a NaN, a non-finite reference, an exact dtype)
// falls back to the full MeasureError, so failures keep their full diagnostics.
#pragma once

#include <ATen/ATen.h>

#include "services/worker/reference_compare.h"

namespace kforge::bench {

class QuickAccuracy {
 public:
  // `truth`: what outputs are compared with (the float64 reference, or eager for exact
  // dtypes); `eager`: eager's output (excuses NaNs eager makes too); `eager_error`: eager's
  // own error against `truth`; `factor`: the allowance over eager's error (the worker's 4).
  QuickAccuracy(const at::Tensor& truth, const at::Tensor& eager, Tolerance tol,
                ErrorStats eager_error, double factor);

  // JudgeAccuracy(MeasureError(output, truth, tol, eager), eager_error, factor, tol), with
  // *max_normalized set to the measured max_normalized. *fast: whether the cheap path decided.
  AccuracyJudgement Judge(const at::Tensor& output, double* max_normalized, bool* fast) const;

 private:
  at::Tensor truth_, eager_;
  at::Tensor truth_flat_, denominator_;  // float64, defined when the fast path applies
  Tolerance tol_;
  ErrorStats eager_error_;
  double factor_;
};

}  // namespace kforge::bench
