// ReferenceRunner on CPU tensors: the dispatcher runs the target at native precision and
// raised to float64, and scalar arguments come out in schema order.
#include "services/worker/reference.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/group_norm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/softmax.h>

#include <ATen/TensorOperators.h>

#include "gtest/gtest.h"
#include "services/worker/reference_compare.h"
#include "tests/worker/worker_test_targets.h"

namespace kforge {
namespace {

using testing::GroupNormTarget;
using testing::SoftmaxTarget;

TEST(ReferenceRunnerTest, SoftmaxNativeMatchesAtenAndFloat64IsDouble) {
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(SoftmaxTarget(64, 512));
  ASSERT_TRUE(runner.ok()) << runner.status();
  at::Tensor x = at::randn({64, 512}) * 3;
  auto native = runner->Run({x}, ReferenceRunner::Precision::kNative);
  auto exact = runner->Run({x}, ReferenceRunner::Precision::kFloat64);
  ASSERT_TRUE(native.ok()) << native.status();
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(native->size(), 1u);
  EXPECT_EQ((*native)[0].scalar_type(), at::kFloat);
  EXPECT_EQ((*exact)[0].scalar_type(), at::kDouble);
  EXPECT_TRUE((*native)[0].equal(at::softmax(x, -1)));
  EXPECT_TRUE(at::allclose((*exact)[0], at::softmax(x.to(at::kDouble), -1)));
  // Eager float32 is within the float32 tolerance of the float64 reference, but not equal.
  ErrorStats eager = MeasureError((*native)[0], (*exact)[0], DtypeTolerance(at::kFloat));
  EXPECT_GT(eager.max_abs, 0);
  EXPECT_LT(eager.max_normalized, 1.0);
  EXPECT_EQ(eager.nonfinite_index, -1);
}

// mul.Tensor whose `other` the capture recorded as a number (a traced Python number): the
// reference multiplies by the 0-dim f64 tensor the trace held, which keeps self's dtype, and
// kernels get the number among the scalar arguments.
TEST(ReferenceRunnerTest, ATensorArgumentRecordedAsANumberIsItsZeroDimTensor) {
  v1::Target t = SoftmaxTarget(4, 8, v1::BFLOAT16);
  v1::SubgraphNode* node = t.mutable_nodes(0);
  node->set_op("aten::mul");
  node->set_overload("Tensor");
  node->clear_args();
  *node->add_args() = testing::TensorArg("self", "in0");
  *node->add_args() = testing::FloatArg("other", 0.125);
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(t);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(runner->scalar_args().floats, std::vector<double>({0.125}));
  at::Tensor x = at::randn({4, 8}).to(at::kBFloat16);
  auto native = runner->Run({x}, ReferenceRunner::Precision::kNative);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ((*native)[0].scalar_type(), at::kBFloat16);
  EXPECT_TRUE((*native)[0].equal(x * at::scalar_tensor(0.125, at::kDouble)));
  auto exact = runner->Run({x}, ReferenceRunner::Precision::kFloat64);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_TRUE((*exact)[0].equal(x.to(at::kDouble) * 0.125));
  // A string is no number: refused naming the argument.
  node->mutable_args(1)->mutable_scalar()->set_string_value("x");
  absl::StatusOr<ReferenceRunner> bad = ReferenceRunner::Create(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("argument 'other' is a tensor but the "
                                                      "target gives a constant that is no number"),
            std::string::npos)
      << bad.status();
}

// An in-place op writes a copy of the input its schema marks written, so validation's inputs
// stay as captured; eager timing runs it in place, as the model does.
TEST(ReferenceRunnerTest, InPlaceOpWritesACopyUnlessAskedToWriteInPlace) {
  absl::StatusOr<ReferenceRunner> runner =
      ReferenceRunner::Create(testing::AddInPlaceTarget(4, 8));
  ASSERT_TRUE(runner.ok()) << runner.status();
  const at::Tensor x = at::randn({4, 8}), y = at::randn({4, 8});
  const at::Tensor x_before = x.clone();
  using Precision = ReferenceRunner::Precision;
  for (Precision precision : {Precision::kNative, Precision::kFloat64}) {
    auto out = runner->Run({x, y}, precision);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(at::allclose((*out)[0].to(at::kFloat), x_before + y));
    EXPECT_TRUE(x.equal(x_before));
  }
  auto in_place = runner->Run({x, y}, ReferenceRunner::Precision::kNative,
                              ReferenceRunner::Writes::kInPlace);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_TRUE(x.equal(x_before + y));
  EXPECT_EQ((*in_place)[0].data_ptr(), x.data_ptr());
}

TEST(ReferenceRunnerTest, SoftmaxScalarArgsInSchemaOrder) {
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(SoftmaxTarget(4, 8));
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(runner->scalar_args().ints, std::vector<int64_t>({-1}));  // dim; dtype None skipped
  EXPECT_TRUE(runner->scalar_args().floats.empty());
}

TEST(ReferenceRunnerTest, GroupNormAffineFloat64ErrorAndScalars) {
  v1::Target target = GroupNormTarget(2, 64, 8, 8, 32);
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target);
  ASSERT_TRUE(runner.ok()) << runner.status();
  // num_groups, cudnn_enabled -> ints; eps -> floats.
  EXPECT_EQ(runner->scalar_args().ints, std::vector<int64_t>({32, 1}));
  ASSERT_EQ(runner->scalar_args().floats.size(), 1u);
  EXPECT_DOUBLE_EQ(runner->scalar_args().floats[0], 1e-5);

  at::Tensor x = at::randn({2, 64, 8, 8}) * 2 + 1;
  at::Tensor w = at::randn({64});
  at::Tensor b = at::randn({64});
  auto native = runner->Run({x, w, b}, ReferenceRunner::Precision::kNative);
  auto exact = runner->Run({x, w, b}, ReferenceRunner::Precision::kFloat64);
  ASSERT_TRUE(native.ok()) << native.status();
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_TRUE((*native)[0].equal(at::group_norm(x, 32, w, b, 1e-5, true)));
  EXPECT_EQ((*exact)[0].scalar_type(), at::kDouble);
  ErrorStats eager = MeasureError((*native)[0], (*exact)[0], DtypeTolerance(at::kFloat));
  EXPECT_GT(eager.max_abs, 0);
  EXPECT_LT(eager.max_normalized, 1.0);
}

TEST(ReferenceRunnerTest, MissingArgumentTakesTheSchemaDefault) {
  v1::Target target = GroupNormTarget(1, 8, 2, 2, 4);
  // Drop eps and cudnn_enabled: the schema's defaults (1e-5, true) fill in.
  auto* args = target.mutable_nodes(0)->mutable_args();
  args->DeleteSubrange(4, 2);
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(runner->scalar_args().ints, std::vector<int64_t>({4, 1}));
  ASSERT_EQ(runner->scalar_args().floats.size(), 1u);
  EXPECT_DOUBLE_EQ(runner->scalar_args().floats[0], 1e-5);
}

TEST(ReferenceRunnerTest, DtypeArgumentIsRaisedToFloat64) {
  v1::Target target = SoftmaxTarget(4, 8);
  v1::Argument* dtype = target.mutable_nodes(0)->mutable_args(2);
  dtype->mutable_scalar()->set_int_value(static_cast<int64_t>(at::kFloat));
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target);
  ASSERT_TRUE(runner.ok()) << runner.status();
  at::Tensor x = at::randn({4, 8});
  auto native = runner->Run({x}, ReferenceRunner::Precision::kNative);
  auto exact = runner->Run({x}, ReferenceRunner::Precision::kFloat64);
  ASSERT_TRUE(native.ok() && exact.ok());
  EXPECT_EQ((*native)[0].scalar_type(), at::kFloat);
  EXPECT_EQ((*exact)[0].scalar_type(), at::kDouble);
}

TEST(ReferenceRunnerTest, UnknownOperatorIsNotFound) {
  v1::Target target = SoftmaxTarget(4, 8);
  target.mutable_nodes(0)->set_op("aten::no_such_op");
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target);
  ASSERT_FALSE(runner.ok());
  EXPECT_TRUE(absl::IsNotFound(runner.status())) << runner.status();
  EXPECT_NE(runner.status().message().find("aten::no_such_op"), std::string::npos);
}

TEST(ReferenceRunnerTest, UndefinedValueIsInvalidArgument) {
  v1::Target target = SoftmaxTarget(4, 8);
  target.mutable_nodes(0)->mutable_args(0)->set_tensor("in7");
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target);
  ASSERT_FALSE(runner.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(runner.status()));
  EXPECT_NE(runner.status().message().find("in7"), std::string::npos);
}

TEST(ReferenceRunnerTest, WrongInputCountAndBadShapeAreErrors) {
  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(GroupNormTarget(1, 8, 2, 2, 4));
  ASSERT_TRUE(runner.ok());
  EXPECT_FALSE(runner->Run({at::randn({1, 8, 2, 2})}, ReferenceRunner::Precision::kNative).ok());
  // 6 channels do not split into 4 groups: PyTorch refuses, and the error says so.
  auto bad = runner->Run({at::randn({1, 6, 2, 2}), at::randn({6}), at::randn({6})},
                         ReferenceRunner::Precision::kNative);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PyTorch"), std::string::npos);
}

TEST(DTypeConversionTest, RoundTrips) {
  for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong, at::kInt,
                           at::kShort, at::kChar, at::kByte, at::kBool}) {
    EXPECT_EQ(ToScalarType(ToProtoDType(t)), t);
  }
  EXPECT_EQ(ToProtoDType(at::kComplexFloat), v1::DTYPE_UNSPECIFIED);
}

}  // namespace
}  // namespace kforge
