// The sweep's seeded inputs (tools/bench/anchor_rows.h) have each input's signature: its sizes
// and its dtype, a 0-dim float64 scalar included (read as float32 bytes, the kernel saw 0).
#include <string>

#include "common/tensor_io.h"
#include "gtest/gtest.h"
#include "services/worker/reference.h"
#include "tools/bench/anchor_rows.h"

namespace kforge::bench {
namespace {

TEST(AnchorRows, SeededInputsHaveTheSignaturesSizesAndDtypes) {
  auto rows = SelectRows("mul-scale-bf16,bn-r50-1x1024x14-fp32,rms-chain-qwen3-q", "t-");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  for (const AnchorRow& row : *rows) {
    SCOPED_TRACE(row.id);
    auto bytes = MakeInputs(row, 7);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto tensors = ParseTensors(*bytes, row.id);
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ASSERT_EQ(static_cast<int>(tensors->size()), row.target.inputs_size());
    for (int i = 0; i < row.target.inputs_size(); ++i) {
      const v1::TensorSignature& sig = row.target.inputs(i);
      const at::Tensor& t = (*tensors)[i].tensor;
      EXPECT_EQ((*tensors)[i].name, row.target.input_names(i));
      EXPECT_EQ(t.scalar_type(), ToScalarType(sig.dtype())) << row.target.input_names(i);
      EXPECT_EQ(t.sizes().vec(), std::vector<int64_t>(sig.sizes().begin(), sig.sizes().end()));
    }
  }
}

// A tensor two nodes of a chain read is one input of the row, as capture names it.
TEST(AnchorRows, AChainRowReadsItsInputAgainByName) {
  auto rows = SelectRows("rms-chain-qwen3-512", "t-");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const v1::Target& t = (*rows)[0].target;
  ASSERT_EQ(t.inputs_size(), 3);  // the hidden state, the eps, the weight
  ASSERT_EQ(t.nodes_size(), 7);
  std::string mul_self;
  for (const v1::Argument& a : t.nodes(4).args()) {
    if (a.name() == "self") mul_self = a.tensor();
  }
  EXPECT_EQ(mul_self, "in0");
}

// The VAE decoder's group norm as captured: one chain target into the SiLU, whose input is
// the norm's output.
TEST(AnchorRows, TheVaeGroupNormChainsIntoItsSilu) {
  auto rows = SelectRows("gn-vae-128x512-fp32,gn-silu-vae-128x512-fp32", "t-");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].target.nodes_size(), 1);
  const v1::Target& t = (*rows)[1].target;
  ASSERT_EQ(t.nodes_size(), 2);
  EXPECT_EQ(t.nodes(1).op(), "aten::silu");
  ASSERT_EQ(t.nodes(1).args_size(), 1);
  EXPECT_EQ(t.nodes(1).args(0).tensor(), t.nodes(0).outputs(0));
  EXPECT_EQ(t.inputs_size(), (*rows)[0].target.inputs_size());
}

// The decoder's residual before a group norm: add -> div -> group_norm -> silu, each node
// reading the one before it, the residual a second input of the add's shape.
TEST(AnchorRows, TheVaeResidualChainsIntoItsGroupNorm) {
  auto rows = SelectRows("res-gn-silu-vae-128x512-fp32", "t-");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const v1::Target& t = (*rows)[0].target;
  ASSERT_EQ(t.nodes_size(), 4);
  EXPECT_EQ(t.nodes(2).op(), "aten::group_norm");
  for (int i = 1; i < t.nodes_size(); ++i) {
    EXPECT_EQ(t.nodes(i).args(0).tensor(), t.nodes(i - 1).outputs(0)) << t.nodes(i).op();
  }
  ASSERT_GE(t.inputs_size(), 2);
  EXPECT_EQ(t.inputs(1).sizes_size(), t.inputs(0).sizes_size());
}

}  // namespace
}  // namespace kforge::bench
