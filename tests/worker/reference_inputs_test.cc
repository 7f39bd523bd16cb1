// Random validation inputs match the captured inputs' value ranges, dtypes and layouts, and
// the held-out shape changes the leading dimension.
#include "services/worker/reference_inputs.h"

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>

#include <limits>

#include <ATen/TensorOperators.h>

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(DrawRandomInputsTest, NormalInputKeepsMeanAndStd) {
  at::Tensor captured = at::randn({256, 256}) * 2 + 5;
  std::vector<at::Tensor> drawn = DrawRandomInputs({captured}, 1);
  ASSERT_EQ(drawn.size(), 1u);
  EXPECT_EQ(drawn[0].sizes(), captured.sizes());
  EXPECT_EQ(drawn[0].scalar_type(), at::kFloat);
  EXPECT_NEAR(drawn[0].mean().item<double>(), 5.0, 0.1);
  EXPECT_NEAR(drawn[0].std().item<double>(), 2.0, 0.1);
  EXPECT_FALSE(drawn[0].equal(captured));
  // Clipped to the captured range.
  EXPECT_GE(drawn[0].min().item<double>(), captured.min().item<double>());
  EXPECT_LE(drawn[0].max().item<double>(), captured.max().item<double>());
}

TEST(DrawRandomInputsTest, UniformRangeIsRespected) {
  at::Tensor captured = at::rand({10000}) + 2;  // [2, 3)
  at::Tensor drawn = DrawRandomInputs({captured}, 2)[0];
  EXPECT_GE(drawn.min().item<double>(), 2.0);
  EXPECT_LT(drawn.max().item<double>(), 3.0);
}

TEST(DrawRandomInputsTest, SeedsAreReproducibleAndDistinct) {
  at::Tensor captured = at::randn({1000});
  EXPECT_TRUE(DrawRandomInputs({captured}, 9)[0].equal(DrawRandomInputs({captured}, 9)[0]));
  EXPECT_FALSE(DrawRandomInputs({captured}, 9)[0].equal(DrawRandomInputs({captured}, 10)[0]));
}

TEST(DrawRandomInputsTest, IntegersStayInTheCapturedRange) {
  at::Tensor captured = at::randint(3, 12, {5000}, at::TensorOptions().dtype(at::kInt));
  at::Tensor drawn = DrawRandomInputs({captured}, 3)[0];
  EXPECT_EQ(drawn.scalar_type(), at::kInt);
  EXPECT_EQ(drawn.min().item<int64_t>(), captured.min().item<int64_t>());
  EXPECT_EQ(drawn.max().item<int64_t>(), captured.max().item<int64_t>());
  EXPECT_FALSE(drawn.equal(captured));
}

TEST(DrawRandomInputsTest, BoolKeepsFrequencyWithinBounds) {
  at::Tensor captured = at::rand({10000}).lt(0.3);
  at::Tensor drawn = DrawRandomInputs({captured}, 4)[0];
  EXPECT_EQ(drawn.scalar_type(), at::kBool);
  EXPECT_NEAR(drawn.to(at::kFloat).mean().item<double>(), 0.3, 0.03);
  // An all-true mask still yields some false entries, so a kernel ignoring it is caught.
  at::Tensor all_true = at::full({1000}, true, at::TensorOptions().dtype(at::kBool));
  at::Tensor spread = DrawRandomInputs({all_true}, 5)[0];
  EXPECT_FALSE(spread.all().item<bool>());
}

TEST(DrawRandomInputsTest, ConstantFloatInputIsSpread) {
  // group_norm weights are often all ones; a kernel that ignores them must still fail.
  at::Tensor ones = at::full({256}, 1.0f);
  at::Tensor drawn = DrawRandomInputs({ones}, 6)[0];
  EXPECT_GT(drawn.std().item<double>(), 0.5);
}

TEST(DrawRandomInputsTest, NonFiniteMaskPositionsArePreserved) {
  at::Tensor mask = at::zeros({8, 8});
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < 8; ++i) {
    for (int j = i + 1; j < 8; ++j) mask[i][j] = ninf;
  }
  at::Tensor drawn = DrawRandomInputs({mask}, 7)[0];
  EXPECT_TRUE(at::isinf(drawn).equal(at::isinf(mask)));
}

TEST(DrawRandomInputsTest, LayoutAndDtypesArePreserved) {
  at::Tensor transposed = at::randn({32, 16}).t();  // strides (1, 16)
  at::Tensor half = at::randn({4, 4}).to(at::kHalf);
  std::vector<at::Tensor> drawn = DrawRandomInputs({transposed, half}, 8);
  EXPECT_EQ(drawn[0].strides(), transposed.strides());
  EXPECT_EQ(drawn[1].scalar_type(), at::kHalf);
  // Held-out sizes keep the dimension order too.
  std::vector<at::Tensor> held = DrawRandomInputs({transposed}, 8, {{20, 32}});
  EXPECT_EQ(held[0].sizes(), at::IntArrayRef({20, 32}));
  EXPECT_EQ(held[0].stride(0), 1);
  EXPECT_EQ(held[0].stride(1), 20);
}

// A key/value head repeated by expand (stride 0): its elements overlap, which copy_ refuses
// to write, so drawn and copied inputs fill the storage they span and keep the strides.
TEST(DrawRandomInputsTest, OverlappingLayoutsKeepTheirStrides) {
  at::Tensor repeated = at::randn({1, 4, 1, 6, 8}).expand({1, 4, 2, 6, 8});
  ASSERT_EQ(repeated.stride(2), 0);
  std::vector<at::Tensor> drawn = DrawRandomInputs({repeated}, 5);
  EXPECT_EQ(drawn[0].strides(), repeated.strides());
  EXPECT_TRUE(drawn[0].select(2, 0).equal(drawn[0].select(2, 1)));  // the head repeats
  EXPECT_FALSE(drawn[0].equal(repeated));

  at::Tensor copy = CopyWithLayout(repeated, at::kCPU);
  EXPECT_EQ(copy.strides(), repeated.strides());
  EXPECT_TRUE(copy.equal(repeated));
  EXPECT_NE(copy.data_ptr(), repeated.data_ptr());
  // Held out, it is drawn dense in its new shape.
  std::vector<at::Tensor> held = DrawRandomInputs({repeated}, 5, {{2, 4, 2, 6, 8}});
  EXPECT_TRUE(held[0].is_non_overlapping_and_dense());
}

TEST(HeldOutSizesTest, LeadingDimensionGrowsForSharingInputs) {
  at::Tensor x = at::randn({8, 16, 4, 4});
  at::Tensor w = at::randn({16});
  at::Tensor same_lead = at::randn({8, 3, 2, 2});
  auto sizes = HeldOutSizes({x, w, same_lead});
  ASSERT_TRUE(sizes.has_value());
  EXPECT_EQ((*sizes)[0], std::vector<int64_t>({10, 16, 4, 4}));
  EXPECT_EQ((*sizes)[1], std::vector<int64_t>({16}));
  EXPECT_EQ((*sizes)[2], std::vector<int64_t>({10, 3, 2, 2}));
  auto one = HeldOutSizes({at::randn({1, 5})});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ((*one)[0][0], 3);
  EXPECT_FALSE(HeldOutSizes({at::randn({})}).has_value());
  // A broadcast input first: the dimension that grows is the one it broadcasts along.
  auto mask_first = HeldOutSizes({at::randn({1, 1, 4, 4}), at::randn({2, 8, 4, 4})});
  ASSERT_TRUE(mask_first.has_value());
  EXPECT_EQ((*mask_first)[0], std::vector<int64_t>({1, 1, 4, 4}));
  EXPECT_EQ((*mask_first)[1], std::vector<int64_t>({3, 8, 4, 4}));
  // A lower-rank weight first: the activation's batch grows, the weight stays.
  auto weight_first = HeldOutSizes({at::randn({6}), at::randn({1, 5, 6})});
  ASSERT_TRUE(weight_first.has_value());
  EXPECT_EQ((*weight_first)[0], std::vector<int64_t>({6}));
  EXPECT_EQ((*weight_first)[1], std::vector<int64_t>({3, 5, 6}));
  // A matmul's operands of one rank: the first one's rows grow, the inner dimension stays.
  auto mm = HeldOutSizes({at::randn({4, 16}), at::randn({16, 8})});
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ((*mm)[0], std::vector<int64_t>({5, 16}));
  EXPECT_EQ((*mm)[1], std::vector<int64_t>({16, 8}));
  // Rounded for a kernel whose vectors must tile the grown dimension: 10 becomes 16.
  auto rounded = HeldOutSizes({x, w, same_lead}, 16);
  ASSERT_TRUE(rounded.has_value());
  EXPECT_EQ((*rounded)[0], std::vector<int64_t>({16, 16, 4, 4}));
  EXPECT_EQ((*rounded)[2], std::vector<int64_t>({16, 3, 2, 2}));
}

}  // namespace
}  // namespace kforge
