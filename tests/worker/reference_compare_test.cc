// Accuracy rule and bit-level checks on CPU tensors: tolerance per dtype, the "as accurate as
// eager" judgement (an fp16-accumulating fp32 softmax fails), poison and run comparisons.
#include "services/worker/reference_compare.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Half.h>

#include <cmath>
#include <limits>

#include <ATen/TensorOperators.h>

#include "gtest/gtest.h"
#include "services/worker/evaluator_guards.h"
#include "services/worker/reference.h"

namespace kforge {
namespace {

// A row softmax in float32 whose row sum is accumulated in `Acc` (float or c10::Half).
template <typename Acc>
at::Tensor HandSoftmax(const at::Tensor& x) {
  at::Tensor out = at::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, in[r * cols + c]);
    Acc sum = Acc(0.0f);
    for (int64_t c = 0; c < cols; ++c) sum = sum + Acc(std::exp(in[r * cols + c] - m));
    for (int64_t c = 0; c < cols; ++c) {
      o[r * cols + c] = std::exp(in[r * cols + c] - m) / static_cast<float>(sum);
    }
  }
  return out;
}

TEST(ToleranceTest, TightPerDtype) {
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kFloat).atol, 1e-5);
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kFloat).rtol, 1e-5);
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kHalf).atol, 1e-3);
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kBFloat16).rtol, 8e-3);
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kLong).atol, 0);
  EXPECT_DOUBLE_EQ(DtypeTolerance(at::kBool).rtol, 0);
}

class SoftmaxAccuracyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = at::randn({64, 1024}) * 3;
    reference_ = at::softmax(x_.to(at::kDouble), -1);
    eager_ = at::softmax(x_, -1);
    eager_error_ = MeasureError(eager_, reference_, tol_);
  }
  at::Tensor x_, reference_, eager_;
  Tolerance tol_ = DtypeTolerance(at::kFloat);
  ErrorStats eager_error_;
};

TEST_F(SoftmaxAccuracyTest, Float32AccumulationPasses) {
  ErrorStats err = MeasureError(HandSoftmax<float>(x_), reference_, tol_, eager_);
  AccuracyJudgement j = JudgeAccuracy(err, eager_error_, 4.0, tol_);
  EXPECT_TRUE(j.pass) << j.message;
  EXPECT_GE(j.allowed, 1.0);
}

TEST_F(SoftmaxAccuracyTest, Float16AccumulationFailsWithMismatchDetails) {
  ErrorStats err = MeasureError(HandSoftmax<c10::Half>(x_), reference_, tol_, eager_);
  AccuracyJudgement j = JudgeAccuracy(err, eager_error_, 4.0, tol_);
  EXPECT_FALSE(j.pass);
  EXPECT_GT(err.max_normalized, j.allowed);
  EXPECT_GE(err.worst_index, 0);
  EXPECT_GT(err.max_abs, 1e-5);
  EXPECT_NE(j.message.find("float64 reference"), std::string::npos) << j.message;
}

TEST_F(SoftmaxAccuracyTest, NoisyEagerWidensTheAllowance) {
  ErrorStats noisy = eager_error_;
  noisy.max_normalized = 10;
  ErrorStats cand = eager_error_;
  cand.max_normalized = 39;
  EXPECT_TRUE(JudgeAccuracy(cand, noisy, 4.0, tol_).pass);
  cand.max_normalized = 41;
  EXPECT_FALSE(JudgeAccuracy(cand, noisy, 4.0, tol_).pass);
}

TEST(MeasureErrorTest, NanWhereReferenceIsFiniteIsReported) {
  at::Tensor ref = at::full({8}, 1.0, at::kDouble);
  at::Tensor out = at::full({8}, 1.0f);
  out[5] = std::numeric_limits<float>::quiet_NaN();
  ErrorStats err = MeasureError(out, ref, DtypeTolerance(at::kFloat));
  EXPECT_EQ(err.nonfinite_index, 5);
  AccuracyJudgement j = JudgeAccuracy(err, ErrorStats{}, 4.0, DtypeTolerance(at::kFloat));
  EXPECT_FALSE(j.pass);
}

TEST(MeasureErrorTest, MatchingNanAndInfAreFineAndSharedOverflowIsExcused) {
  at::Tensor ref = at::full({4}, 2.0, at::kDouble);
  ref[1] = std::numeric_limits<double>::quiet_NaN();
  ref[2] = std::numeric_limits<double>::infinity();
  at::Tensor out = ref.to(at::kFloat);
  EXPECT_EQ(MeasureError(out, ref, DtypeTolerance(at::kFloat)).nonfinite_index, -1);
  // Eager overflows to inf at element 3 where float64 stays finite; a candidate that does
  // the same is excused, one that overflows elsewhere is not.
  at::Tensor eager = out.clone();
  eager[3] = std::numeric_limits<float>::infinity();
  at::Tensor same = eager.clone();
  EXPECT_EQ(MeasureError(same, ref, DtypeTolerance(at::kFloat), eager).nonfinite_index, -1);
  at::Tensor other = out.clone();
  other[0] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(MeasureError(other, ref, DtypeTolerance(at::kFloat), eager).nonfinite_index, 0);
}

TEST(MeasureErrorTest, IntegersMustMatchExactly) {
  at::Tensor ref = at::arange(10, at::kLong);
  at::Tensor out = ref.clone();
  ErrorStats ok = MeasureError(out, ref, DtypeTolerance(at::kLong));
  EXPECT_TRUE(JudgeAccuracy(ok, ok, 4.0, DtypeTolerance(at::kLong)).pass);
  out[7] = 8;
  ErrorStats bad = MeasureError(out, ref, DtypeTolerance(at::kLong));
  EXPECT_EQ(bad.worst_index, 7);
  EXPECT_FALSE(JudgeAccuracy(bad, ok, 4.0, DtypeTolerance(at::kLong)).pass);
}

TEST(PoisonCheckTest, FillBitsMakesNanForEveryFloatType) {
  for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
    at::Tensor x = at::empty({16}, at::TensorOptions().dtype(t));
    FillBits(x, PoisonBits(ToProtoDType(t), Poison::kA));
    EXPECT_TRUE(at::isnan(x).all().item<bool>()) << t;
    FillBits(x, PoisonBits(ToProtoDType(t), Poison::kB));
    EXPECT_FALSE(at::isnan(x).any().item<bool>()) << t;
  }
}

TEST(PoisonCheckTest, UnwrittenElementIsFound) {
  at::Tensor ref = at::randn({4, 8}, at::kDouble);
  at::Tensor out = at::empty({4, 8});
  const uint64_t a = PoisonBits(v1::FLOAT32, Poison::kA);
  FillBits(out, a);
  out.copy_(ref);
  EXPECT_EQ(FindPoisonWhereFinite(out, a, ref), -1);
  FillBits(out[2][3], a);  // left unwritten
  EXPECT_EQ(FindPoisonWhereFinite(out, a, ref), 2 * 8 + 3);
  // Where the reference itself is NaN, a NaN output is not "unwritten" by this check.
  ref[2][3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(FindPoisonWhereFinite(out, a, ref), -1);
}

TEST(PoisonCheckTest, TwoRunRuleFindsElementsNeverWritten) {
  const uint64_t a = PoisonBits(v1::UINT8, Poison::kA);
  const uint64_t b = PoisonBits(v1::UINT8, Poison::kB);
  at::Tensor run_a = at::arange(16, at::kByte);
  at::Tensor run_b = run_a.clone();
  // Element 9 legitimately holds poison B's value in both runs: written, not unwritten.
  run_a[9] = static_cast<int64_t>(b);
  run_b[9] = static_cast<int64_t>(b);
  EXPECT_EQ(FindUnwritten(run_a, a, run_b, b), -1);
  run_a[12] = static_cast<int64_t>(a);
  run_b[12] = static_cast<int64_t>(b);
  EXPECT_EQ(FindUnwritten(run_a, a, run_b, b), 12);
}

TEST(PoisonCheckTest, BitDifferenceSeesSignOfZeroAndNanPayloads) {
  at::Tensor x = at::zeros({6});
  at::Tensor y = x.clone();
  EXPECT_EQ(FindBitDifference(x, y), -1);
  y[4] = -0.0f;  // equal as numbers, different bits
  EXPECT_EQ(FindBitDifference(x, y), 4);
  EXPECT_EQ(FindBits(y, 0x80000000ULL), 4);
}

}  // namespace
}  // namespace kforge
