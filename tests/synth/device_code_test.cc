// Device code compiled for the host (device_code.h): the multiply-shift division is exact, and
// the elementwise kernels' broadcast offsets equal the per-dim walk over the input's sizes
// and strides for random broadcast patterns and layouts, with groups merged as documented;
// a row span (kf_row_span, the reuse path's form) is what it says; a view read along its own
// shape (the layout family's copy) is read where its strides say; an elementwise call's path
// (kf_decide) follows its inputs' forms and alignment; an ordered split's tickets name every
// chunk's read and write once, every read of a row block before its writes, `lag` apart; a
// spread chain operand (a per-channel bias) is read where the per-dim walk says, row by row;
// a two-pass softmax's shifted exp is eager's exp(x - max), masked and infinite rows included;
// an upsampled view (kf_repeat_view) reads each output element's nearest input, and a copy's
// view (kf_copy_view) the input in its output's memory order.
#include "services/proposer/synth/device_code.h"

#include <cmath>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace kforge::synth {
namespace {

KfTensor Tensor(const std::vector<long long>& sizes, const std::vector<long long>& strides) {
  KfTensor t{};
  t.ndim = static_cast<int>(sizes.size());
  t.numel = 1;
  for (int d = 0; d < t.ndim; ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
    t.numel *= sizes[d];
  }
  return t;
}

std::vector<long long> ContiguousStrides(const std::vector<long long>& sizes) {
  std::vector<long long> strides(sizes.size());
  long long s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= sizes[d];
  }
  return strides;
}

// Row-major coordinates of `e` in `out`, read through `t` aligned from the right.
long long ReferenceOffset(const KfTensor& t, const KfTensor& out, long long e) {
  long long offset = 0;
  for (int d = out.ndim - 1; d >= 0; --d) {
    const long long coord = e % out.sizes[d];
    e /= out.sizes[d];
    const int td = d - (out.ndim - t.ndim);
    if (td >= 0 && t.sizes[td] != 1) offset += coord * t.strides[td];
  }
  return offset;
}

// 1 to 5 dims of 1 to 4 elements.
std::vector<long long> RandomSizes(std::mt19937& rng) {
  std::vector<long long> sizes(1 + rng() % 5);
  for (long long& n : sizes) n = 1 + static_cast<long long>(rng() % 4);
  return sizes;
}

template <typename I>
KfGroups<I> Groups(const KfTensor& t, const KfTensor& out) {
  KfGroups<I> g;
  kf_groups<I>(t, out, g);
  return g;
}

template <typename I>
void ExpectOffsetsMatch(const KfTensor& t, const KfTensor& out) {
  const KfGroups<I> g = Groups<I>(t, out);
  for (long long e = 0; e < out.numel; ++e) {
    ASSERT_EQ(static_cast<long long>(kf_group_offset<I>(g, static_cast<I>(e))),
              ReferenceOffset(t, out, e))
        << "element " << e;
  }
}

// kf_row_span's promise: a nonzero span r means input offset = e % r for every element.
void ExpectRowSpanMatches(const KfTensor& t, const KfTensor& out) {
  const long long r = kf_row_span(t, out);
  if (r == 0) return;
  EXPECT_LT(r, out.numel);
  for (long long e = 0; e < out.numel; ++e) {
    ASSERT_EQ(e % r, ReferenceOffset(t, out, e)) << "element " << e << ", span " << r;
  }
}

TEST(BroadcastGroups, AttentionMaskIsOneGroup) {
  const KfTensor out = Tensor({1, 8, 2048, 2048}, ContiguousStrides({1, 8, 2048, 2048}));
  const KfTensor mask = Tensor({1, 1, 2048, 2048}, ContiguousStrides({1, 1, 2048, 2048}));
  const KfGroups<int> g = Groups<int>(mask, out);
  ASSERT_EQ(g.n, 1);
  EXPECT_EQ(g.size[0], 2048 * 2048);
  EXPECT_EQ(g.stride[0], 1);
  EXPECT_EQ(kf_group_offset<int>(g, 3 * 2048 * 2048 + 5), 5);
}

TEST(BroadcastGroups, PerChannelScaleAndRowVectorKeepTheirOuterGroups) {
  // [C,1] along [N,C,HW]: the inner HW broadcasts, C is read, N broadcasts and drops out.
  const KfTensor out = Tensor({4, 3, 5}, ContiguousStrides({4, 3, 5}));
  const KfGroups<int> channel = Groups<int>(Tensor({3, 1}, {1, 1}), out);
  ASSERT_EQ(channel.n, 2);
  EXPECT_EQ(channel.size[0], 5);
  EXPECT_EQ(channel.stride[0], 0);
  EXPECT_EQ(channel.size[1], 3);
  EXPECT_EQ(channel.stride[1], 1);
  ExpectOffsetsMatch<int>(Tensor({3, 1}, {1, 1}), out);
  // A scalar-like input reads nothing: no groups.
  EXPECT_EQ(Groups<int>(Tensor({1, 1, 1}, {1, 1, 1}), out).n, 0);
}

TEST(BroadcastGroups, AlternatingDimsMakeAGroupEach) {
  // Read and broadcast dims alternate: nothing merges, seven groups, the last one read.
  const std::vector<long long> sizes = {2, 1, 3, 1, 2, 1, 3};
  const std::vector<long long> out_sizes = {2, 2, 3, 2, 2, 2, 3};
  const KfTensor in = Tensor(sizes, ContiguousStrides(sizes));
  const KfTensor out = Tensor(out_sizes, ContiguousStrides(out_sizes));
  EXPECT_EQ(Groups<int>(in, out).n, 7);
  ExpectOffsetsMatch<int>(in, out);
}

TEST(FastDivide, ExactFor31BitNumerators) {
  std::mt19937_64 rng(11);
  std::vector<long long> divisors = {1, 2, 3, 5, 7, 49, 768, 2048, 1000003, 4194304,
                                     (1ll << 30) + 1, (1ll << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<long long>(rng() % ((1ull << 31) - 1)));
  for (long long d : divisors) {
    const KfDivisor div = kf_divisor(static_cast<unsigned long long>(d));
    std::vector<long long> numerators = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1ll << 31) - 1};
    for (int i = 0; i < 2000; ++i) numerators.push_back(static_cast<long long>(rng() % (1ull << 31)));
    for (long long e : numerators) {
      if (e < 0 || e >= (1ll << 31)) continue;
      ASSERT_EQ(kf_divide(static_cast<unsigned>(e), div), e / d) << e << " / " << d;
    }
  }
}

TEST(BroadcastGroups, RandomPatternsAndLayoutsMatchThePerDimWalk) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<long long> out_sizes = RandomSizes(rng);
    const int out_dims = static_cast<int>(out_sizes.size());
    const int in_dims = 1 + static_cast<int>(rng() % out_dims);
    std::vector<long long> in_sizes(in_dims);
    for (int d = 0; d < in_dims; ++d) {
      in_sizes[d] = rng() % 3 == 0 ? 1 : out_sizes[d + out_dims - in_dims];
    }
    // Half the inputs in a permuted (still dense) layout.
    std::vector<int> order(in_dims);
    for (int d = 0; d < in_dims; ++d) order[d] = d;
    if (rng() % 2 == 0) std::shuffle(order.begin(), order.end(), rng);
    std::vector<long long> in_strides(in_dims);
    long long s = 1;
    for (int k = in_dims - 1; k >= 0; --k) {
      in_strides[order[k]] = s;
      s *= in_sizes[order[k]];
    }
    const KfTensor out = Tensor(out_sizes, ContiguousStrides(out_sizes));
    const KfTensor in = Tensor(in_sizes, in_strides);
    ExpectOffsetsMatch<int>(in, out);
    ExpectOffsetsMatch<kf_i64>(in, out);
    ExpectRowSpanMatches(in, out);
  }
}

// The layout family reads a view through its own shape (kf_groups(x, x)): every element of
// random transposed, expanded (stride 0) and sliced views is where the per-dim walk says.
TEST(BroadcastGroups, AViewReadAlongItsOwnShapeMatchesThePerDimWalk) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<long long> sizes = RandomSizes(rng);
    const int dims = static_cast<int>(sizes.size());
    std::vector<long long> strides(dims);
    std::vector<int> order(dims);
    for (int d = 0; d < dims; ++d) order[d] = d;
    std::shuffle(order.begin(), order.end(), rng);
    long long s = 1 + static_cast<long long>(rng() % 2);  // sometimes a slice's step
    for (int k = dims - 1; k >= 0; --k) {
      strides[order[k]] = rng() % 4 == 0 ? 0 : s;  // an expanded dim
      s *= sizes[order[k]] + static_cast<long long>(rng() % 2);
    }
    const KfTensor view = Tensor(sizes, strides);
    ExpectOffsetsMatch<int>(view, view);
    ExpectOffsetsMatch<kf_i64>(view, view);
  }
}

// Nearest-neighbour upsampling as the layout family reads it: output element (n, c, h, w) of
// random transposed views upsampled by whole factors comes from input (n, c, h / rh, w / rw),
// through the input's strides, reading kf_repeat_view along its own shape.
TEST(CopyView, ARepeatViewReadsEachOutputElementsNearestInput) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<long long> sizes = RandomSizes(rng);
    const int dims = static_cast<int>(sizes.size());
    std::vector<int> order(dims), repeat(dims);
    for (int d = 0; d < dims; ++d) order[d] = d;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<long long> strides(dims), out_sizes(dims);
    long long s = 1;
    for (int k = dims - 1; k >= 0; --k) {
      strides[order[k]] = s;
      s *= sizes[order[k]];
    }
    for (int d = 0; d < dims; ++d) {
      repeat[d] = 1 + static_cast<int>(rng() % 3);
      out_sizes[d] = sizes[d] * repeat[d];
    }
    const KfTensor in = Tensor(sizes, strides);
    KfTensor view;
    if (!kf_repeat_view(in, repeat.data(), view)) {
      int extra = 0;
      for (int r : repeat) extra += r > 1;
      EXPECT_GT(dims + extra, KF_MAX_DIMS);
      continue;
    }
    const KfGroups<int> g = Groups<int>(view, view);
    ASSERT_EQ(view.numel, Tensor(out_sizes, ContiguousStrides(out_sizes)).numel);
    for (long long e = 0; e < view.numel; ++e) {
      long long rest = e, expected = 0;
      for (int d = dims - 1; d >= 0; --d) {
        expected += (rest % out_sizes[d]) / repeat[d] * strides[d];
        rest /= out_sizes[d];
      }
      ASSERT_EQ(kf_group_offset<int>(g, static_cast<int>(e)), expected) << "element " << e;
    }
  }
  // Five dims, four of them upsampled, need nine: more than the ABI's eight; three, eight.
  const int repeat[5] = {1, 2, 2, 2, 2};
  KfTensor view;
  EXPECT_FALSE(kf_repeat_view(Tensor({1, 2, 3, 4, 5}, ContiguousStrides({1, 2, 3, 4, 5})),
                              repeat, view));
  const int three[5] = {1, 2, 2, 2, 1};
  EXPECT_TRUE(kf_repeat_view(Tensor({1, 2, 3, 4, 5}, ContiguousStrides({1, 2, 3, 4, 5})),
                             three, view));
  EXPECT_EQ(view.ndim, 8);
}

// A copy into an output dense in another order (eager's upsample or clone of a channels-last
// tensor): element e of kf_copy_view is the input element that the output's e-th element of
// memory holds, for random permuted outputs and repeats; a contiguous output reads the
// upsampled input in its logical order.
TEST(CopyView, ACopyIntoAPermutedOutputReadsItInTheOutputsMemoryOrder) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<long long> sizes = RandomSizes(rng);
    const int dims = static_cast<int>(sizes.size());
    std::vector<int> repeat(KF_MAX_DIMS, 0), in_order(dims), out_order(dims);
    std::vector<long long> out_sizes(dims);
    for (int d = 0; d < dims; ++d) {
      repeat[d] = trial % 3 == 0 ? 1 : 1 + static_cast<int>(rng() % 2);
      out_sizes[d] = sizes[d] * repeat[d];
      in_order[d] = out_order[d] = d;
    }
    std::shuffle(in_order.begin(), in_order.end(), rng);
    if (trial % 2 == 0) std::shuffle(out_order.begin(), out_order.end(), rng);
    // Dense strides laying the dims out in `order` (outermost first).
    auto dense = [&](const std::vector<long long>& n, const std::vector<int>& order) {
      std::vector<long long> strides(dims);
      long long step = 1;
      for (int k = dims - 1; k >= 0; --k) {
        strides[order[k]] = step;
        step *= n[order[k]];
      }
      return strides;
    };
    const std::vector<long long> in_strides = dense(sizes, in_order);
    const std::vector<long long> out_strides = dense(out_sizes, out_order);
    KfTensor view;
    if (!kf_copy_view(Tensor(sizes, in_strides), Tensor(out_sizes, out_strides), repeat.data(),
                      view)) {
      continue;  // more than KF_MAX_DIMS dims: ARepeatView... covers the refusal
    }
    // Each output element's memory position, and the input element it holds.
    std::vector<long long> expected(view.numel, -1);
    const KfTensor out = Tensor(out_sizes, ContiguousStrides(out_sizes));
    for (long long e = 0; e < out.numel; ++e) {
      long long rest = e, memory = 0, source = 0;
      for (int d = dims - 1; d >= 0; --d) {
        const long long coord = rest % out_sizes[d];
        rest /= out_sizes[d];
        memory += coord * out_strides[d];
        source += coord / repeat[d] * in_strides[d];
      }
      expected[memory] = source;
    }
    const KfGroups<kf_i64> g = Groups<kf_i64>(view, view);
    for (long long m = 0; m < view.numel; ++m) {
      ASSERT_EQ(kf_group_offset<kf_i64>(g, m), expected[m]) << "memory position " << m;
    }
  }
}

// An output dense in some order (a transposed q times a table of positions, as rotary
// embeddings compute) is walked in its memory order (kf_in_memory_order): the output becomes
// contiguous, and element e of the walk, the e-th of the output's memory, reads each input
// where the per-dim walk of the original dims says. A contiguous output keeps its dims.
TEST(ElementwisePath, APermutedOutputIsWalkedInItsMemoryOrder) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<long long> sizes = RandomSizes(rng);
    const int dims = static_cast<int>(sizes.size());
    // The output dense in a random order; an input of its shape in another random order, or
    // broadcast over some dims; a second input contiguous over trailing dims (a table).
    auto dense_in_order = [&](const std::vector<long long>& shape) {
      std::vector<int> order(shape.size());
      for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<long long> strides(shape.size());
      long long s = 1;
      for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
        strides[order[k]] = s;
        s *= shape[order[k]];
      }
      return strides;
    };
    const KfTensor out = Tensor(sizes, dense_in_order(sizes));
    std::vector<long long> in_sizes = sizes;
    for (long long& n : in_sizes) n = rng() % 3 == 0 ? 1 : n;
    const KfTensor in0 = Tensor(in_sizes, dense_in_order(in_sizes));
    const int table_dims = 1 + static_cast<int>(rng() % dims);
    const std::vector<long long> table_sizes(sizes.end() - table_dims, sizes.end());
    const KfTensor in1 = Tensor(table_sizes, ContiguousStrides(table_sizes));
    const KfCallTensors t = kf_in_memory_order(in0, in1, out);
    ASSERT_TRUE(kf_flat(t.out, t.out)) << "trial " << trial;
    if (kf_flat(out, out)) {
      EXPECT_EQ(t.in0.ndim, in0.ndim);
      EXPECT_TRUE(std::equal(t.in0.strides, t.in0.strides + in0.ndim, in0.strides));
    }
    const KfGroups<kf_i64> g0 = Groups<kf_i64>(t.in0, t.out);
    const KfGroups<kf_i64> g1 = Groups<kf_i64>(t.in1, t.out);
    // Every element by its row-major coordinates in the original dims.
    for (long long e = 0; e < out.numel; ++e) {
      long long rest = e, at = 0, ref0 = 0, ref1 = 0;
      for (int d = dims - 1; d >= 0; --d) {
        const long long coord = rest % sizes[d];
        rest /= sizes[d];
        at += coord * out.strides[d];
        if (in_sizes[d] != 1) ref0 += coord * in0.strides[d];
        const int td = d - (dims - table_dims);
        if (td >= 0 && table_sizes[td] != 1) ref1 += coord * in1.strides[td];
      }
      ASSERT_EQ(kf_group_offset<kf_i64>(g0, at), ref0) << "trial " << trial << " element " << e;
      ASSERT_EQ(kf_group_offset<kf_i64>(g1, at), ref1) << "trial " << trial << " element " << e;
    }
  }
}

TEST(RowSpan, MasksAndBiasesSpanOneOutputRow) {
  const std::vector<long long> scores = {2, 8, 16, 16};
  const KfTensor out = Tensor(scores, ContiguousStrides(scores));
  auto span = [&](const std::vector<long long>& sizes) {
    return kf_row_span(Tensor(sizes, ContiguousStrides(sizes)), out);
  };
  EXPECT_EQ(span({1, 1, 16, 16}), 256);  // a causal mask shared by batch and heads
  EXPECT_EQ(span({16, 16}), 256);         // the same without its leading 1s
  EXPECT_EQ(span({16}), 16);              // a bias over the last dim
  EXPECT_EQ(span({2, 1, 16, 16}), 0);     // per batch: repeats in the middle, not outside
  EXPECT_EQ(span({1, 8, 1, 1}), 0);       // per head: not the innermost elements
  EXPECT_EQ(span(scores), 0);             // the output's shape: nothing repeats
  // The innermost elements in another layout are not one dense row.
  EXPECT_EQ(kf_row_span(Tensor({16, 16}, {1, 16}), out), 0);
}

TEST(RowOffset, RowsOfATransposedViewAreFoundThroughItsStrides) {
  // [B,H,S,D] viewed from [B,S,H,D]: row (b,h,s) starts at b*S*H*D + s*H*D + h*D.
  const long long B = 2, H = 3, S = 5, D = 16;
  const KfTensor view = Tensor({B, H, S, D}, {S * H * D, D, H * D, 1});
  long long row = 0;
  for (long long b = 0; b < B; ++b) {
    for (long long h = 0; h < H; ++h) {
      for (long long s = 0; s < S; ++s, ++row) {
        EXPECT_EQ(kf_outer_offset(view, row, 3), b * S * H * D + s * H * D + h * D) << row;
      }
    }
  }
  // Contiguous rows: row * D, and one value per row of a [B,H,S,1] output: the row itself.
  const std::vector<long long> dense = {B, H, S, D};
  EXPECT_EQ(kf_outer_offset(Tensor(dense, ContiguousStrides(dense)), 7, 3), 7 * D);
  const std::vector<long long> per_row = {B, H, S, 1};
  EXPECT_EQ(kf_outer_offset(Tensor(per_row, ContiguousStrides(per_row)), 7, 3), 7);
}

TEST(SoftmaxExp, OneFfmaBeforeTheEx2IsExpOfTheDifferenceAsEagerHasIt) {
  auto shifted_exp = [](float x, float max) {
    const KfExpShift e = kf_exp_shift(max);
    return std::exp2(std::fma(x, e.scale, e.shift));
  };
  // Ordinary rows: within a few of max's ulps in the exponent of exp(x - max).
  for (float max : {0.f, 3.5f, -7.25f, 40.f, 1000.f}) {
    for (float d : {0.f, -0.5f, -3.f, -20.f}) {
      const double want = std::exp(double(d));
      EXPECT_NEAR(shifted_exp(max + d, max), want, want * 1e-4 + 1e-12) << max << " " << d;
    }
    EXPECT_EQ(shifted_exp(-3.3895314e38f, max), 0.f);  // masked by bfloat16's lowest
    EXPECT_EQ(shifted_exp(-INFINITY, max), 0.f);
  }
  // A row masked throughout by the lowest value: exp(0) at every element, as eager's.
  const float lowest = -3.3895314e38f;
  EXPECT_EQ(shifted_exp(lowest, lowest), 1.f);
  EXPECT_EQ(shifted_exp(-3.38e38f, 3.0e38f), 0.f);  // far below a huge max
  EXPECT_EQ(shifted_exp(3.0e38f, 3.0e38f), 1.f);
  // An infinite or NaN max: NaN, as eager's inf - inf.
  EXPECT_TRUE(std::isnan(shifted_exp(-INFINITY, -INFINITY)));
  EXPECT_TRUE(std::isnan(shifted_exp(INFINITY, INFINITY)));
  EXPECT_TRUE(std::isnan(shifted_exp(1.f, NAN)));
}

TEST(ElementwisePath, FollowsTheInputsFormsAndAlignment) {
  const std::vector<long long> scores = {1, 8, 16, 16};
  const KfTensor out = Tensor(scores, ContiguousStrides(scores));
  const KfTensor mask = Tensor({1, 1, 16, 16}, ContiguousStrides({1, 1, 16, 16}));
  const KfTensor scalar = Tensor({}, {});
  // A mask over heads: read by runs of the last dim, or once for `reuse` rows of 256.
  KfSetup s = kf_decide(out, mask, out, 2, 4, 1, true);
  EXPECT_EQ(s.small, 1);
  EXPECT_EQ(s.path, KF_PATH_VEC);
  EXPECT_EQ(s.mode0, KF_FLAT);
  EXPECT_EQ(s.mode1, KF_RUN);
  s = kf_decide(out, mask, out, 2, 4, 2, true);
  EXPECT_EQ(s.path, KF_PATH_REUSE);
  EXPECT_EQ(s.row_input, 1);
  EXPECT_EQ(s.inner, 256);
  // Misaligned pointers, or a last dim that vectors do not tile: element by element.
  s = kf_decide(out, mask, out, 2, 4, 2, false);
  EXPECT_EQ(s.path, KF_PATH_SCALAR);
  EXPECT_EQ(s.mode0, KF_FLAT);
  EXPECT_EQ(s.mode1, KF_SCALAR_ONLY);
  const KfTensor odd = Tensor({3, 5}, ContiguousStrides({3, 5}));
  const KfTensor odd_row = Tensor({5}, {1});
  EXPECT_EQ(kf_decide(odd, odd_row, odd, 2, 2, 1, true).path, KF_PATH_SCALAR);
  // Flat inputs vectorize whatever the last dim (a tail finishes), a 0-d scalar is constant.
  EXPECT_EQ(kf_decide(odd, odd, odd, 2, 2, 1, true).path, KF_PATH_VEC);
  s = kf_decide(out, scalar, out, 2, 4, 1, true);
  EXPECT_EQ(s.path, KF_PATH_VEC);
  EXPECT_EQ(s.mode1, KF_CONST);
  // One input: the second is the first.
  s = kf_decide(out, out, out, 1, 1, 1, true);
  EXPECT_EQ(s.path, KF_PATH_SCALAR);
  EXPECT_EQ(s.mode0, KF_FLAT);
  EXPECT_EQ(s.mode1, KF_FLAT);
}

TEST(ElementwisePath, AViewWhoseOffsetsPass2To31TakesWideIndices) {
  // x[:, :128] of a [20000, 131072] tensor: 2.56M elements, its last row at offset 2.6e9.
  const KfTensor slice = Tensor({20000, 128}, {131072, 1});
  const KfTensor out = Tensor({20000, 128}, ContiguousStrides({20000, 128}));
  EXPECT_TRUE(kf_fits_index32(out));
  EXPECT_FALSE(kf_fits_index32(slice));
  EXPECT_EQ(kf_decide(slice, slice, out, 1, 4, 1, true).small, 0);
  EXPECT_EQ(kf_decide(out, slice, out, 2, 4, 1, true).small, 0);
  // The same slice of a [20000, 1024] tensor fits; an expanded dim (stride 0) adds nothing.
  EXPECT_EQ(kf_decide(Tensor({20000, 128}, {1024, 1}), out, out, 2, 4, 1, true).small, 1);
  EXPECT_FALSE(kf_fits_index32(Tensor({1 << 20, 4096}, {0, 1})));  // 2^32 elements
  EXPECT_TRUE(kf_fits_index32(Tensor({1 << 16, 4096}, {0, 1})));
}

// The ordered split's schedule for every row block count, split and lag up to a dozen: each
// chunk read once and written once; a row block's writes only after all its reads (a block
// waits only for smaller tickets: no deadlock); and its first write right after the reads of
// row block `rb + lag` (the reads in between are the L2 budget).
// kf_spread's promise, for every row of `cols` elements: element c of the row reads the
// operand where the per-dim walk says, and a "whole" row's aligned vectors read one element.
void ExpectSpreadMatches(const KfTensor& operand, const KfTensor& value, long long cols, int vec,
                         long long step = 1) {
  for (long long start = 0; start < value.numel; start += cols) {
    const KfSpread s = kf_spread(operand, value, start, vec);
    for (long long c = 0; c < cols; c += step) {
      ASSERT_EQ(kf_spread_offset(s, c), ReferenceOffset(operand, value, start + c))
          << "row start " << start << ", element " << c;
      if (s.whole && c % vec == 0 && c + vec <= cols) {
        ASSERT_EQ(kf_spread_offset(s, c + vec - 1), kf_spread_offset(s, c)) << c;
      }
    }
  }
}

TEST(DeviceCodeTest, SpreadOperandsReadTheirChannelRowByRow) {
  // A UNet's time embedding [N,C,1,1] over [N,C,H,W] in group norm rows of C/G channels, and
  // a per-channel [C,1,1] repeated over the batch.
  const KfTensor value = Tensor({2, 8, 3, 4}, ContiguousStrides({2, 8, 3, 4}));
  for (const std::vector<long long>& sizes :
       std::vector<std::vector<long long>>{{2, 8, 1, 1}, {8, 1, 1}, {1, 8, 1, 1}, {2, 8, 3, 1}}) {
    SCOPED_TRACE(sizes.size());
    const KfTensor operand = Tensor(sizes, ContiguousStrides(sizes));
    for (long long cols : {12, 24, 48, 96, 192}) ExpectSpreadMatches(operand, value, cols, 4);
  }
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int dims = 2 + static_cast<int>(rng() % 4);
    std::vector<long long> sizes(dims);
    for (long long& v : sizes) v = 1 + static_cast<long long>(rng() % 5);
    // The operand: leading ones, the value's dims, then at least one trailing one.
    const int first = static_cast<int>(rng() % (dims - 1));
    const int last = first + static_cast<int>(rng() % (dims - 1 - first));
    std::vector<long long> op_sizes(sizes.begin(), sizes.begin() + dims);
    for (int d = 0; d < dims; ++d) {
      if (d < first || d > last) op_sizes[d] = 1;
    }
    const KfTensor value_t = Tensor(sizes, ContiguousStrides(sizes));
    const KfTensor operand = Tensor(op_sizes, ContiguousStrides(op_sizes));
    long long cols = 1;  // rows of the trailing dims, as the row engines walk them
    for (int d = dims - 1 - static_cast<int>(rng() % dims); d < dims; ++d) cols *= sizes[d];
    ExpectSpreadMatches(operand, value_t, cols, 1 + static_cast<int>(rng() % 4));
  }
  // Past 2^30 elements the offsets take 64-bit divisions: the same answers.
  const std::vector<long long> big = {4, 512, 1024, 1024};
  const KfTensor huge = Tensor(big, ContiguousStrides(big));
  const KfTensor channels = Tensor({512, 1, 1}, ContiguousStrides({512, 1, 1}));
  ASSERT_FALSE(kf_spread(channels, huge, 0, 4).fast);
  ExpectSpreadMatches(channels, huge, 16 * 1024 * 1024, 4, 1024 * 1024 - 1);
}

TEST(DeviceCodeTest, TicketOrderReadsEveryChunkBeforeItsWriteLagRowBlocksApart) {
  for (long long row_blocks = 1; row_blocks <= 12; ++row_blocks) {
    for (int split : {1, 2, 3, 8}) {
      for (long long lag = 1; lag <= row_blocks; ++lag) {
        std::vector<long long> read_at(row_blocks * split, -1), write_at(row_blocks * split, -1);
        const unsigned long long count = kf_ticket_count(row_blocks, split);
        ASSERT_EQ(count, 2ull * row_blocks * split);
        for (unsigned long long t = 0; t < count; ++t) {
          const KfTicketItem item = kf_ticket_item(t, row_blocks, lag, split);
          ASSERT_GE(item.row_block, 0);
          ASSERT_LT(item.row_block, row_blocks);
          ASSERT_GE(item.part, 0);
          ASSERT_LT(item.part, split);
          long long& at = (item.write ? write_at : read_at)[item.row_block * split + item.part];
          ASSERT_EQ(at, -1) << "ticket " << t << " repeats an item";
          at = static_cast<long long>(t);
        }
        for (long long rb = 0; rb < row_blocks; ++rb) {
          const auto first = [&](const std::vector<long long>& at) {
            return *std::min_element(at.begin() + rb * split, at.begin() + (rb + 1) * split);
          };
          const auto last = [&](const std::vector<long long>& at) {
            return *std::max_element(at.begin() + rb * split, at.begin() + (rb + 1) * split);
          };
          EXPECT_LT(last(read_at), first(write_at)) << row_blocks << " " << split << " " << lag;
          long long read_before = 0;  // row blocks with a read before rb's first write
          for (long long other = 0; other < row_blocks; ++other) {
            read_before += read_at[other * split] < first(write_at) ? 1 : 0;
          }
          EXPECT_EQ(read_before, std::min(rb + lag + 1, row_blocks))
              << row_blocks << " " << split << " " << lag << " " << rb;
        }
      }
    }
  }
}

// The lag: the budget's bytes in row blocks, rounded, at least one, scaled by lag_halves / 2
// (rounded half up), and at most all.
TEST(DeviceCodeTest, TicketLagIsTheBudgetInRowBlocksRoundedThenScaled) {
  const long long mib = 1 << 20;
  EXPECT_EQ(kf_ticket_lag(32, 4 * mib, 15 * mib, 2), 4);  // 3.75: the VAE's 4 MB rows
  EXPECT_EQ(kf_ticket_lag(32, 2 * mib, 15 * mib, 2), 8);  // 7.5
  EXPECT_EQ(kf_ticket_lag(32, 64 * mib, 15 * mib, 2), 1);
  EXPECT_EQ(kf_ticket_lag(3, 1024, 15 * mib, 2), 3);
  EXPECT_EQ(kf_ticket_lag(1, 0, 15 * mib, 2), 1);
  // The H100's quarter of L2 (12.5 MB) over 8 MB rows: 2 row blocks, then 1, 3 and 4.
  const long long quarter = 50 * mib / 4;
  EXPECT_EQ(kf_ticket_lag(32, 8 * mib, quarter, 1), 1);
  EXPECT_EQ(kf_ticket_lag(32, 8 * mib, quarter, 3), 3);
  EXPECT_EQ(kf_ticket_lag(32, 8 * mib, quarter, 4), 4);
  // Over 4 MB rows 3, halved 2 (1.5 rounded up), and 5 at one and a half.
  EXPECT_EQ(kf_ticket_lag(32, 4 * mib, quarter, 1), 2);
  EXPECT_EQ(kf_ticket_lag(32, 4 * mib, quarter, 3), 5);
  // Rows over the budget keep a lag of 1 halved, and the scale stops at every row block.
  EXPECT_EQ(kf_ticket_lag(32, 64 * mib, quarter, 1), 1);
  EXPECT_EQ(kf_ticket_lag(32, 64 * mib, quarter, 3), 2);
  EXPECT_EQ(kf_ticket_lag(5, 2 * mib, quarter, 4), 5);
}

}  // namespace
}  // namespace kforge::synth
