// Unit tests of tools/bench/quick_accuracy.h on CPU tensors: its verdict, message and
// max_normalized must be exactly JudgeAccuracy(MeasureError(...)) — on passing outputs (the
// fast path) and on failing, NaN, non-finite-reference and exact-dtype cases (the fallback).
#include "tools/bench/quick_accuracy.h"

#include <limits>

#include "gtest/gtest.h"

namespace kforge::bench {
namespace {

struct Case {
  at::Tensor truth, eager, output;
};

// The worker's rule, computed the slow way.
AccuracyJudgement Reference(const Case& c, double* max_normalized) {
  const Tolerance tol = DtypeTolerance(c.output.scalar_type());
  const ErrorStats eager_error = MeasureError(c.eager, c.truth, tol);
  const ErrorStats err = MeasureError(c.output, c.truth, tol, c.eager);
  *max_normalized = err.max_normalized;
  return JudgeAccuracy(err, eager_error, 4.0, tol);
}

void ExpectSame(const Case& c, bool want_pass, bool want_fast) {
  const Tolerance tol = DtypeTolerance(c.output.scalar_type());
  QuickAccuracy quick(c.truth, c.eager, tol, MeasureError(c.eager, c.truth, tol), 4.0);
  double got_max = -1, want_max = -2;
  bool fast = false;
  const AccuracyJudgement got = quick.Judge(c.output, &got_max, &fast);
  const AccuracyJudgement want = Reference(c, &want_max);
  EXPECT_EQ(got.pass, want.pass);
  EXPECT_EQ(got.pass, want_pass);
  EXPECT_EQ(got.message, want.message);
  EXPECT_DOUBLE_EQ(got.allowed, want.allowed);
  if (std::isnan(want_max)) {
    EXPECT_TRUE(std::isnan(got_max));
  } else {
    EXPECT_EQ(got_max, want_max);  // bit-identical, not just close
  }
  EXPECT_EQ(fast, want_fast);
}

Case Softmaxish(at::ScalarType dtype) {
  at::manual_seed(7);
  Case c;
  c.truth = at::softmax(at::randn({64, 513}, at::kDouble), -1);
  c.eager = c.truth.to(dtype);
  c.output = (c.truth * (1 + 1e-3 * at::randn_like(c.truth))).to(dtype);
  return c;
}

TEST(QuickAccuracy, PassingOutputsTakeTheFastPathWithTheSameNumbers) {
  ExpectSame(Softmaxish(at::kHalf), true, true);
  ExpectSame(Softmaxish(at::kFloat), false, false);  // 1e-3 relative is outside fp32's tolerance
  Case exact = Softmaxish(at::kFloat);
  exact.output = exact.eager.clone();
  ExpectSame(exact, true, true);
}

TEST(QuickAccuracy, FailuresFallBackToTheFullDiagnostics) {
  Case c = Softmaxish(at::kHalf);
  c.output[3][7] = 0.5;  // far off
  ExpectSame(c, false, false);
}

TEST(QuickAccuracy, NanAndInfOutputsFail) {
  Case c = Softmaxish(at::kBFloat16);
  c.output[1][1] = std::numeric_limits<float>::quiet_NaN();
  ExpectSame(c, false, false);
  Case d = Softmaxish(at::kBFloat16);
  d.output[2][2] = std::numeric_limits<float>::infinity();
  ExpectSame(d, false, false);
}

TEST(QuickAccuracy, NonFiniteReferenceUsesTheFullCheck) {
  Case c = Softmaxish(at::kFloat);
  c.output = c.eager.clone();
  c.truth[0][0] = std::numeric_limits<double>::infinity();
  c.eager[0][0] = std::numeric_limits<float>::infinity();
  c.output[0][0] = std::numeric_limits<float>::infinity();
  ExpectSame(c, true, false);
}

TEST(QuickAccuracy, ExactDtypesUseTheFullCheck) {
  Case c;
  c.truth = at::arange(100, at::kLong);
  c.eager = c.truth.clone();
  c.output = c.truth.clone();
  ExpectSame(c, true, false);
  c.output[5] = 6;
  ExpectSame(c, false, false);
}

}  // namespace
}  // namespace kforge::bench
