#include "common/op_cost.h"

#include <gtest/gtest.h>

#include <vector>

namespace kforge {
namespace {

v1::TensorSignature Sig(std::vector<int64_t> sizes, v1::DType dtype = v1::FLOAT32) {
  v1::TensorSignature s;
  for (int64_t d : sizes) s.add_sizes(d);
  s.set_dtype(dtype);
  return s;
}

v1::Target OneNode(const std::string& op, std::vector<v1::TensorSignature> inputs,
                   std::vector<v1::TensorSignature> outputs) {
  v1::Target t;
  t.add_nodes()->set_op(op);
  for (auto& s : inputs) *t.add_inputs() = s;
  for (auto& s : outputs) *t.add_outputs() = s;
  return t;
}

TEST(OpCost, SoftmaxMovesItsTensorsOnceAndCountsPerElementWork) {
  v1::Target t = OneNode("aten::softmax", {Sig({4096, 256})}, {Sig({4096, 256})});
  OpCost c = EstimateOpCost(t);
  EXPECT_EQ(c.min_bytes, 2 * 4096 * 256 * 4);
  EXPECT_EQ(c.min_flops, 5 * 4096 * 256);
  EXPECT_FALSE(c.tensor_cores);
}

TEST(OpCost, GemmCountsTwoMnkAndUsesTensorCoresInHalfPrecision) {
  v1::Target fp32 = OneNode("aten::mm", {Sig({64, 128}), Sig({128, 32})}, {Sig({64, 32})});
  EXPECT_EQ(EstimateOpCost(fp32).min_flops, 2 * 64 * 128 * 32);
  EXPECT_FALSE(EstimateOpCost(fp32).tensor_cores);
  v1::Target bf16 = OneNode("aten::linear",
                            {Sig({8, 16, 128}, v1::BFLOAT16), Sig({64, 128}, v1::BFLOAT16)},
                            {Sig({8, 16, 64}, v1::BFLOAT16)});
  EXPECT_EQ(EstimateOpCost(bf16).min_flops, 2 * (8 * 16 * 64) * 128);
  EXPECT_TRUE(EstimateOpCost(bf16).tensor_cores);
}

TEST(OpCost, ConvolutionReducesOverItsWeightPerOutputChannel) {
  v1::Target t = OneNode("aten::conv2d", {Sig({1, 64, 56, 56}), Sig({128, 64, 3, 3})},
                         {Sig({1, 128, 56, 56})});
  EXPECT_EQ(EstimateOpCost(t).min_flops, 2LL * (128 * 56 * 56) * (64 * 3 * 3));
}

TEST(OpCost, UnknownOpHasNoFlopEstimateButStillABytesFloor) {
  v1::Target t = OneNode("aten::some_new_op", {Sig({1000})}, {Sig({1000})});
  OpCost c = EstimateOpCost(t);
  EXPECT_EQ(c.min_flops, 0);
  EXPECT_EQ(c.min_bytes, 8000);
}

TEST(OpCost, FloorIsTheSlowerOfBandwidthAndArithmetic) {
  v1::GpuInfo gpu;
  gpu.set_copy_bandwidth_bytes_per_s(4e12);
  gpu.set_peak_flops(50e12);
  gpu.set_peak_tensor_flops(800e12);
  // Memory-bound: bytes decide.
  v1::Target softmax = OneNode("aten::softmax", {Sig({4096, 256})}, {Sig({4096, 256})});
  EXPECT_DOUBLE_EQ(FloorSeconds(softmax, gpu), 2.0 * 4096 * 256 * 4 / 4e12);
  // fp32 GEMM 4096^3: 137 GFLOP at 50 TFLOP/s beats 200 MB at 4 TB/s.
  v1::Target gemm = OneNode("aten::mm", {Sig({4096, 4096}), Sig({4096, 4096})},
                            {Sig({4096, 4096})});
  EXPECT_DOUBLE_EQ(FloorSeconds(gemm, gpu), 2.0 * 4096 * 4096 * 4096 / 50e12);
  // No measured bandwidth: no floor.
  EXPECT_EQ(FloorSeconds(gemm, v1::GpuInfo{}), 0);
}

TEST(OpCost, SetOpCostFillsTheTargetFields) {
  v1::Target t = OneNode("aten::gelu", {Sig({10, 10}, v1::FLOAT16)}, {Sig({10, 10}, v1::FLOAT16)});
  SetOpCost(t);
  EXPECT_EQ(t.min_bytes_moved(), 400);
  EXPECT_EQ(t.min_flops(), 800);
  EXPECT_FALSE(t.tensor_core_op());
}

}  // namespace
}  // namespace kforge
