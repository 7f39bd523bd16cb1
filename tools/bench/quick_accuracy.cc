// The quick pass's accuracy check (see quick_accuracy.h).
#include "tools/bench/quick_accuracy.h"

namespace kforge::bench {

QuickAccuracy::QuickAccuracy(const at::Tensor& truth, const at::Tensor& eager, Tolerance tol,
                             ErrorStats eager_error, double factor)
    : truth_(truth), eager_(eager), tol_(tol), eager_error_(eager_error), factor_(factor) {
  const bool exact = tol.atol == 0 && tol.rtol == 0;
  at::Tensor r = truth.to(at::kDouble).contiguous().reshape({-1});
  // The fast path needs a finite reference: then MeasureError's `finite` mask is the output's,
  // and an all-finite output makes every where() in it the identity.
  if (!exact && r.numel() > 0 && at::isfinite(r).all().item<bool>()) {
    truth_flat_ = r;
    denominator_ = at::abs(r) * tol.rtol + tol.atol;  // MeasureError's abs_r * rtol + atol
  }
}

AccuracyJudgement QuickAccuracy::Judge(const at::Tensor& output, double* max_normalized,
                                       bool* fast) const {
  *fast = false;
  if (truth_flat_.defined() && output.numel() == truth_flat_.numel()) {
    at::Tensor c = output.to(at::kDouble).contiguous().reshape({-1});
    // (|c - r|) / (|r| rtol + atol): MeasureError's diff / denominator where all is finite. A
    // NaN or inf output makes the max NaN or inf, which JudgeAccuracy fails: full path below.
    const double m = at::abs(c - truth_flat_).div_(denominator_).max().item<double>();
    ErrorStats stats;
    stats.numel = c.numel();
    stats.max_normalized = m;
    AccuracyJudgement j = JudgeAccuracy(stats, eager_error_, factor_, tol_);
    if (j.pass) {
      *max_normalized = m;
      *fast = true;
      return j;
    }
  }
  ErrorStats err = MeasureError(output, truth_, tol_, eager_);
  *max_normalized = err.max_normalized;
  return JudgeAccuracy(err, eager_error_, factor_, tol_);
}

}  // namespace kforge::bench
