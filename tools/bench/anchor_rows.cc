// The anchor rows of ../shared/GPU.md and family-space enumeration (see anchor_rows.h).
#include "tools/bench/anchor_rows.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/randn.h>

#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/op_cost.h"
#include "common/tensor_io.h"
#include "common/tensor_signature.h"
#include "services/worker/reference.h"

namespace kforge::bench {
namespace {

using synth::Config;

v1::TensorSignature Dense(const std::vector<int64_t>& sizes, v1::DType dtype) {
  return DenseSignature(sizes, dtype);
}

using scalar::Int;
using scalar::Float;
using scalar::Bool;
using scalar::None;
using scalar::Ints;

class RowBuilder {
 public:
  RowBuilder(std::string_view id_prefix, std::string id, std::string label, std::string op,
             std::string overload)
      : id_prefix_(id_prefix) {
    row_.id = std::move(id);
    row_.label = std::move(label);
    node_ = row_.target.add_nodes();
    node_->set_op(std::move(op));
    node_->set_overload(std::move(overload));
  }
  RowBuilder& Tensor(const std::string& name, const v1::TensorSignature& sig, Fill fill) {
    const std::string value = absl::StrCat("in", row_.target.inputs_size());
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    arg->set_tensor(value);
    row_.target.add_input_names(value);
    *row_.target.add_inputs() = sig;
    row_.fills.push_back(fill);
    return *this;
  }
  RowBuilder& Scalar(const std::string& name, const v1::ScalarValue& value) {
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    *arg->mutable_scalar() = value;
    return *this;
  }
  // The chain's next node, whose argument `name` is the value the node before it computes.
  RowBuilder& Then(std::string op, std::string overload, const std::string& name) {
    const std::string value = absl::StrCat("v", row_.target.nodes_size() - 1);
    node_->add_outputs(value);
    node_ = row_.target.add_nodes();
    node_->set_op(std::move(op));
    node_->set_overload(std::move(overload));
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    arg->set_tensor(value);
    return *this;
  }
  // Argument `name` of the current node reads the row's input `input` again (a tensor two nodes
  // of a chain read, which capture names once).
  RowBuilder& Input(const std::string& name, int input) {
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    arg->set_tensor(row_.target.input_names(input));
    return *this;
  }
  AnchorRow Output(const v1::TensorSignature& sig) {
    node_->add_outputs("out0");
    row_.target.add_output_names("out0");
    *row_.target.add_outputs() = sig;
    row_.target.set_id(absl::StrCat(std::string(id_prefix_), row_.id));
    SetOpCost(row_.target);
    return std::move(row_);
  }

 private:
  std::string_view id_prefix_;
  AnchorRow row_;
  v1::SubgraphNode* node_;
};

// The SD VAE decoder's group norm arguments after its input: 32 groups over `channels`.
RowBuilder& VaeGroupNormArgs(RowBuilder& row, int64_t channels) {
  return row.Scalar("num_groups", Int(32))
      .Tensor("weight", Dense({channels}, v1::FLOAT32), Fill::kWeight)
      .Tensor("bias", Dense({channels}, v1::FLOAT32), Fill::kBias)
      .Scalar("eps", Float(1e-6))
      .Scalar("cudnn_enabled", Bool(true));
}

// A refusal's message with digits folded, so "block of 2048 threads" and "block of 4096
// threads" count as one reason.
std::string ReasonKind(const std::string& why) {
  std::string out;
  for (char c : why) {
    if (c >= '0' && c <= '9') {
      if (out.empty() || out.back() != '#') out.push_back('#');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

const char* FillName(Fill f) {
  switch (f) {
    case Fill::kWeight:
      return "weight";
    case Fill::kBias:
      return "bias";
    default:
      return "normal";
  }
}

// The rows of GPU.md's "Anchor figures" table, in its order.
std::vector<AnchorRow> AnchorRows(std::string_view id_prefix) {
  using S = std::vector<int64_t>;
  std::vector<AnchorRow> rows;
  auto pool = [&](std::string id, std::string label, S x, v1::DType t) {
    S y = {x[0], x[1], 1, 1};
    rows.push_back(
        RowBuilder(id_prefix, std::move(id), std::move(label), "aten::adaptive_avg_pool2d", "")
            .Tensor("self", Dense(x, t), Fill::kNormal)
            .Scalar("output_size", Ints({1, 1}))
            .Output(Dense(y, t)));
  };
  auto group_norm = [&](std::string id, std::string label, S x, v1::DType t, double eps) {
    rows.push_back(RowBuilder(id_prefix, std::move(id), std::move(label), "aten::group_norm", "")
                       .Tensor("input", Dense(x, t), Fill::kNormal)
                       .Scalar("num_groups", Int(32))
                       .Tensor("weight", Dense({x[1]}, t), Fill::kWeight)
                       .Tensor("bias", Dense({x[1]}, t), Fill::kBias)
                       .Scalar("eps", Float(eps))
                       .Scalar("cudnn_enabled", Bool(true))
                       .Output(Dense(x, t)));
  };
  auto softmax = [&](std::string id, std::string label, S x, v1::DType t) {
    rows.push_back(RowBuilder(id_prefix, std::move(id), std::move(label), "aten::softmax", "int")
                       .Tensor("self", Dense(x, t), Fill::kNormal)
                       .Scalar("dim", Int(-1))
                       .Scalar("dtype", None())
                       .Output(Dense(x, t)));
  };
  pool("avgpool-r50", "adaptive_avg_pool2d→1×1, 32×2048×7×7 fp32 (ResNet-50)", {32, 2048, 7, 7},
       v1::FLOAT32);
  pool("avgpool-fp16", "adaptive_avg_pool2d→1×1, 256×2048×7×7 fp16", {256, 2048, 7, 7},
       v1::FLOAT16);
  // SD's VAE GroupNorm uses eps 1e-6; the others the nn.GroupNorm default.
  group_norm("gn-vae-fp32", "group_norm G=32, 1×512×128×128 fp32 (SD VAE)", {1, 512, 128, 128},
             v1::FLOAT32, 1e-6);
  group_norm("gn-bf16", "group_norm G=32, 1×256×512×512 bf16", {1, 256, 512, 512}, v1::BFLOAT16,
             1e-5);
  group_norm("gn-fp16", "group_norm G=32, 1×128×1024×1024 fp16", {1, 128, 1024, 1024}, v1::FLOAT16,
             1e-5);
  softmax("softmax-attn-fp32", "softmax dim −1, 1×8×2048×2048 fp32 (attention)", {1, 8, 2048, 2048},
          v1::FLOAT32);
  softmax("softmax-attn-bf16", "softmax dim −1, 1×16×4096×4096 bf16", {1, 16, 4096, 4096},
          v1::BFLOAT16);
  softmax("softmax-router", "softmax dim −1, 4096×256 fp32 (MoE router)", {4096, 256}, v1::FLOAT32);
  softmax("softmax-vocab", "softmax dim −1, 8×262144 fp32 (vocab)", {8, 262144}, v1::FLOAT32);
  rows.push_back(
      RowBuilder(id_prefix, "rms-norm-bf16", "rms_norm, 8192×2048 bf16", "aten::rms_norm", "")
          .Tensor("input", Dense({8192, 2048}, v1::BFLOAT16), Fill::kNormal)
          .Scalar("normalized_shape", Ints({2048}))
          .Tensor("weight", Dense({2048}, v1::BFLOAT16), Fill::kWeight)
          .Scalar("eps", Float(1e-6))
          .Output(Dense({8192, 2048}, v1::BFLOAT16)));
  rows.push_back(
      RowBuilder(id_prefix, "layer-norm-fp16", "layer_norm, 8192×4096 fp16", "aten::layer_norm", "")
          .Tensor("input", Dense({8192, 4096}, v1::FLOAT16), Fill::kNormal)
          .Scalar("normalized_shape", Ints({4096}))
          .Tensor("weight", Dense({4096}, v1::FLOAT16), Fill::kWeight)
          .Tensor("bias", Dense({4096}, v1::FLOAT16), Fill::kBias)
          .Scalar("eps", Float(1e-5))
          .Scalar("cudnn_enable", Bool(true))
          .Output(Dense({8192, 4096}, v1::FLOAT16)));
  return rows;
}

std::vector<AnchorRow> ModelRows(std::string_view id_prefix) {
  std::vector<AnchorRow> rows;
  rows.push_back(RowBuilder(id_prefix, "mask-add-bf16",
                            "add, 1×8×2048×2048 + 1×1×2048×2048 bf16 (attention mask)",
                            "aten::add", "Tensor")
                     .Tensor("self", Dense({1, 8, 2048, 2048}, v1::BFLOAT16), Fill::kNormal)
                     .Tensor("other", Dense({1, 1, 2048, 2048}, v1::BFLOAT16), Fill::kNormal)
                     .Scalar("alpha", Int(1))
                     .Output(Dense({1, 8, 2048, 2048}, v1::BFLOAT16)));
  // Qwen3-MoE's attention scale: a 0-dim float64 tensor on the device.
  rows.push_back(RowBuilder(id_prefix, "mul-scale-bf16",
                            "mul, 1×8×2048×2048 bf16 × f64[] (attention scale on the device)",
                            "aten::mul", "Tensor")
                     .Tensor("self", Dense({1, 8, 2048, 2048}, v1::BFLOAT16), Fill::kNormal)
                     .Tensor("other", Dense({}, v1::FLOAT64), Fill::kWeight)
                     .Output(Dense({1, 8, 2048, 2048}, v1::BFLOAT16)));
  // The language models' attention as kforge captures it, one chain target:
  // softmax(scores * scale + mask, float32).to(bf16), the mask one row per query over 8 heads.
  rows.push_back(
      RowBuilder(id_prefix, "attn-chain-bf16",
                 "mul -> add -> softmax -> to, 1×8×2048×2048 bf16, mask 1×1×2048×2048 "
                 "(Qwen3, Gemma3 attention)",
                 "aten::mul", "Tensor")
          .Tensor("self", Dense({1, 8, 2048, 2048}, v1::BFLOAT16), Fill::kNormal)
          .Tensor("other", Dense({}, v1::FLOAT64), Fill::kWeight)
          .Then("aten::add", "Tensor", "self")
          .Tensor("other", Dense({1, 1, 2048, 2048}, v1::BFLOAT16), Fill::kNormal)
          .Scalar("alpha", Int(1))
          .Then("aten::softmax", "int", "self")
          .Scalar("dim", Int(-1))
          .Scalar("dtype", Int(6))  // float32
          .Then("aten::to", "dtype", "self")
          .Scalar("dtype", Int(15))  // bfloat16
          .Scalar("non_blocking", Bool(false))
          .Scalar("copy", Bool(false))
          .Scalar("memory_format", None())
          .Output(Dense({1, 8, 2048, 2048}, v1::BFLOAT16)));
  // The SD VAE decoder's residual into its next group norm as kforge captures it, one chain
  // target: silu(group_norm((x + residual) / scale)), the scale a 0-dim float64 tensor; its
  // output pass re-reads two inputs where the group norm alone re-reads one.
  {
    RowBuilder row(id_prefix, "res-gn-silu-vae-128x512-fp32",
                   "add -> div -> group_norm G=32 -> silu, 1×128×512×512 fp32 "
                   "(SD VAE decoder's residual)",
                   "aten::add", "Tensor");
    row.Tensor("self", Dense({1, 128, 512, 512}, v1::FLOAT32), Fill::kNormal)
        .Tensor("other", Dense({1, 128, 512, 512}, v1::FLOAT32), Fill::kNormal)
        .Scalar("alpha", Int(1))
        .Then("aten::div", "Tensor", "self")
        .Tensor("other", Dense({}, v1::FLOAT64), Fill::kWeight)
        .Then("aten::group_norm", "", "input");
    VaeGroupNormArgs(row, 128).Then("aten::silu", "", "self");
    rows.push_back(row.Output(Dense({1, 128, 512, 512}, v1::FLOAT32)));
  }
  // Gemma3's RMSNorm weight, `1 + weight.float()` with the 1 a 0-dim float64 tensor on the
  // device: 512 elements, launch-bound (kforge trailed torch.compile's graph replays by
  // 0.07 µs there, 2026-12-04).
  rows.push_back(RowBuilder(id_prefix, "to-add-bf16-512",
                            "to -> add, bf16[512] to float32 + f64[] (Gemma3's RMSNorm weight)",
                            "aten::to", "dtype")
                     .Tensor("self", Dense({512}, v1::BFLOAT16), Fill::kWeight)
                     .Scalar("dtype", Int(6))  // float32
                     .Scalar("non_blocking", Bool(false))
                     .Scalar("copy", Bool(false))
                     .Scalar("memory_format", None())
                     .Then("aten::add", "Tensor", "self")
                     .Tensor("other", Dense({}, v1::FLOAT64), Fill::kWeight)
                     .Scalar("alpha", Int(1))
                     .Output(Dense({512}, v1::FLOAT32)));
  // Qwen3's RMSNorm written out as the H200 capture records it: the hidden state in float32,
  // read by pow and by the mul (one input), the eps a 0-dim float64 tensor, then
  // `weight * h.to(bf16)`; the hidden state's norm over 512 and the q heads' over 64.
  // Launch-bound: kforge trailed torch.compile's graph replays by 0.8-0.9 µs (2026-12-05).
  for (const auto& [id, x] :
       {std::pair<const char*, std::vector<int64_t>>{"rms-chain-qwen3-512", {1, 2048, 512}},
        {"rms-chain-qwen3-q", {1, 2048, 8, 64}}}) {
    rows.push_back(
        RowBuilder(id_prefix, id,
                   absl::StrCat("pow -> mean -> add -> rsqrt -> mul -> to -> mul, ",
                                absl::StrJoin(x, "×"), " fp32 -> bf16 (Qwen3's RMSNorm)"),
                   "aten::pow", "Tensor_Scalar")
            .Tensor("self", Dense(x, v1::FLOAT32), Fill::kNormal)
            .Scalar("exponent", Int(2))
            .Then("aten::mean", "dim", "self")
            .Scalar("dim", Ints({-1}))
            .Scalar("keepdim", Bool(true))
            .Scalar("dtype", None())
            .Then("aten::add", "Tensor", "self")
            .Tensor("other", Dense({}, v1::FLOAT64), Fill::kWeight)
            .Scalar("alpha", Int(1))
            .Then("aten::rsqrt", "", "self")
            .Then("aten::mul", "Tensor", "other")
            .Input("self", 0)
            .Then("aten::to", "dtype", "self")
            .Scalar("dtype", Int(15))  // bfloat16
            .Scalar("non_blocking", Bool(false))
            .Scalar("copy", Bool(false))
            .Scalar("memory_format", None())
            .Then("aten::mul", "Tensor", "other")
            .Tensor("self", Dense({x.back()}, v1::BFLOAT16), Fill::kWeight)
            .Output(Dense(x, v1::BFLOAT16)));
  }
  // The decoder's group norms alone (gn-vae-*), and as kforge captures most of them: the chain
  // into the SiLU after (gn-silu-vae-*), whose exp and division a group norm alone lacks.
  for (const auto& [c, hw] : {std::pair<int64_t, int64_t>{128, 512}, {256, 256}, {256, 512}}) {
    const std::vector<int64_t> x = {1, c, hw, hw};
    for (const bool silu : {false, true}) {
      RowBuilder row(id_prefix,
                     absl::StrCat(silu ? "gn-silu-vae-" : "gn-vae-", c, "x", hw, "-fp32"),
                     absl::StrCat("group_norm G=32", silu ? " → silu" : "", ", 1×", c, "×", hw, "×",
                                  hw, " fp32 (SD VAE decoder)"),
                     "aten::group_norm", "");
      VaeGroupNormArgs(row.Tensor("input", Dense(x, v1::FLOAT32), Fill::kNormal), c);
      if (silu) row.Then("aten::silu", "", "self");
      rows.push_back(row.Output(Dense(x, v1::FLOAT32)));
    }
  }
  // ResNet-50's batch norms in inference: its planes at batch 32 (the largest is DRAM-bound,
  // the smallest barely) and launch-bound calls at batch 1.
  for (const auto& [n, c, hw] : {std::tuple<int64_t, int64_t, int64_t>{32, 256, 56},
                                 {32, 512, 28}, {32, 1024, 14}, {32, 2048, 7}, {1, 128, 28},
                                 {1, 256, 14}, {1, 1024, 14}}) {
    const std::vector<int64_t> x = {n, c, hw, hw};
    const auto channel = Dense({c}, v1::FLOAT32);
    rows.push_back(RowBuilder(id_prefix, absl::StrCat("bn-r50-", n, "x", c, "x", hw, "-fp32"),
                              absl::StrCat("batch_norm inference, ", n, "×", c, "×", hw, "×", hw,
                                           " fp32 (ResNet-50)"),
                              "aten::batch_norm", "")
                       .Tensor("input", Dense(x, v1::FLOAT32), Fill::kNormal)
                       .Tensor("weight", channel, Fill::kWeight)
                       .Tensor("bias", channel, Fill::kBias)
                       .Tensor("running_mean", channel, Fill::kBias)
                       .Tensor("running_var", channel, Fill::kWeight)
                       .Scalar("training", Bool(false))
                       .Scalar("momentum", Float(0.1))
                       .Scalar("eps", Float(1e-5))
                       .Scalar("cudnn_enabled", Bool(true))
                       .Output(Dense(x, v1::FLOAT32)));
  }
  return rows;
}

// The rows `filter` names ("" = all anchor rows): comma-separated ids (of anchor or model
// rows) or 1-based positions (of anchor rows).
absl::StatusOr<std::vector<AnchorRow>> SelectRows(const std::string& filter,
                                                  std::string_view id_prefix) {
  std::vector<AnchorRow> all = AnchorRows(id_prefix);
  if (filter.empty()) return all;
  const size_t anchors = all.size();
  for (AnchorRow& r : ModelRows(id_prefix)) all.push_back(std::move(r));
  std::set<size_t> picked;
  for (absl::string_view token : absl::StrSplit(filter, ',', absl::SkipWhitespace())) {
    const std::string name(token);
    size_t found = all.size();
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].id == name || (i < anchors && std::to_string(i + 1) == name)) found = i;
    }
    if (found == all.size()) {
      std::vector<std::string> ids;
      for (const AnchorRow& r : all) ids.push_back(r.id);
      return absl::InvalidArgumentError(
          absl::StrCat("--rows: no row '", name, "'; use ids (or 1-based anchor positions) of: ",
                       absl::StrJoin(ids, ", ")));
    }
    picked.insert(found);
  }
  std::vector<AnchorRow> out;
  for (size_t i : picked) out.push_back(all[i]);
  return out;
}

// One real-looking call's inputs as torch.save bytes (CPU tensors, seeded).
absl::StatusOr<std::string> MakeInputs(const AnchorRow& row, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<NamedTensor> tensors;
  for (int i = 0; i < row.target.inputs_size(); ++i) {
    const v1::TensorSignature& sig = row.target.inputs(i);
    at::Tensor t = at::randn(std::vector<int64_t>(sig.sizes().begin(), sig.sizes().end()));
    if (row.fills[i] == Fill::kWeight) t = t * 0.1 + 1;
    if (row.fills[i] == Fill::kBias) t = t * 0.1;
    tensors.push_back({row.target.input_names(i), t.to(ToScalarType(sig.dtype()))});
  }
  return SerializeTensors(tensors);
}

absl::StatusOr<Enumeration> Enumerate(const synth::KernelGenerator& generator) {
  const auto& params = generator.Space().params();
  Enumeration e;
  e.product = generator.Space().Size();
  constexpr double kMaxProduct = 5e7;
  if (e.product > kMaxProduct) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the family's space has %.3g configs; the sweep enumerates at most %.0g",
                        e.product, kMaxProduct));
  }
  std::vector<size_t> digit(params.size(), 0);
  std::set<std::string> seen;
  while (true) {
    std::vector<std::pair<std::string, std::string>> values;
    values.reserve(params.size());
    for (size_t p = 0; p < params.size(); ++p) {
      values.emplace_back(params[p].name, params[p].values[digit[p]]);
    }
    Config raw(std::move(values));
    Config c = generator.Canonicalize(raw);
    // A point that canonicalizes elsewhere is counted at its canonical form (every canonical
    // form is itself a point of the product space).
    if (c == raw && seen.insert(c.ToString()).second) {
      std::string why = generator.Check(c);
      if (why.empty()) {
        e.valid.push_back(std::move(c));
      } else {
        ++e.refusals[ReasonKind(why)];
      }
    }
    size_t p = 0;
    while (p < params.size() && ++digit[p] == params[p].values.size()) digit[p++] = 0;
    if (p == params.size()) break;
  }
  e.canonical = static_cast<int64_t>(seen.size());
  return e;
}

}  // namespace kforge::bench
