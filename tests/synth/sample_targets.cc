// Sample targets for the synthesizer tests.
#include "tests/synth/sample_targets.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tensor_signature.h"
#include "gtest/gtest.h"
#include "services/proposer/synth/family_registry.h"
#include "services/proposer/synth/seeded_rng.h"

namespace kforge::synth::testing {
namespace {

using scalar::Int;
using scalar::Float;
using scalar::Bool;
using scalar::Str;
using scalar::None;
using scalar::Ints;
using scalar::Floats;

// Builds a single-node target: tensors become inputs in0, in1, ... in argument order.
class TargetBuilder {
 public:
  TargetBuilder(std::string op, std::string overload) {
    node_ = target_.add_nodes();
    node_->set_op(std::move(op));
    node_->set_overload(std::move(overload));
  }
  TargetBuilder& Tensor(const std::string& name, const v1::TensorSignature& sig) {
    const std::string value = "in" + std::to_string(target_.inputs_size());
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    arg->set_tensor(value);
    target_.add_input_names(value);
    *target_.add_inputs() = sig;
    return *this;
  }
  // The schema string capture records; the one the in-place ops need (AliasedInput reads it).
  TargetBuilder& Schema(std::string schema) {
    node_->set_schema(std::move(schema));
    return *this;
  }
  TargetBuilder& Scalar(const std::string& name, const v1::ScalarValue& value) {
    v1::Argument* arg = node_->add_args();
    arg->set_name(name);
    *arg->mutable_scalar() = value;
    return *this;
  }
  v1::Target Output(const v1::TensorSignature& sig) {
    node_->add_outputs("out0");
    target_.add_output_names("out0");
    *target_.add_outputs() = sig;
    target_.set_id(node_->op() + "-sample");
    return target_;
  }

 private:
  v1::Target target_;
  v1::SubgraphNode* node_;
};

// torch's ScalarType value of a float dtype, as capture records a dtype argument.
int64_t TorchDType(v1::DType dtype) {
  return dtype == v1::FLOAT16 ? 5 : dtype == v1::BFLOAT16 ? 15 : 6;
}

// Joins single-node targets into a chain, as capture records one: node i+1's tensor argument
// `links[i]` becomes node i's output v<i>; every other tensor stays an input (in0, in1, ... in
// order); the last node's output is the chain's.
v1::Target JoinChain(const std::vector<v1::Target>& nodes, const std::vector<std::string>& links) {
  v1::Target chain;
  std::string id;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const v1::Target& single = nodes[i];
    v1::SubgraphNode* node = chain.add_nodes();
    *node = single.nodes(0);
    node->clear_outputs();
    for (v1::Argument& arg : *node->mutable_args()) {
      if (arg.kind_case() != v1::Argument::kTensor) continue;
      if (i > 0 && arg.name() == links[i - 1]) {
        arg.set_tensor("v" + std::to_string(i - 1));
        continue;
      }
      int k = 0;
      while (single.input_names(k) != arg.tensor()) ++k;
      const std::string name = "in" + std::to_string(chain.inputs_size());
      arg.set_tensor(name);
      chain.add_input_names(name);
      *chain.add_inputs() = single.inputs(k);
    }
    const bool last = i + 1 == nodes.size();
    node->add_outputs(last ? "out0" : "v" + std::to_string(i));
    absl::StrAppend(&id, i ? "-" : "", node->op().substr(6));
  }
  chain.add_output_names("out0");
  *chain.add_outputs() = nodes.back().outputs(0);
  chain.set_id(id + "-sample");
  return chain;
}

// `chain` with node `node`'s tensor argument `arg` reading the chain's input `input` again,
// as capture names a tensor that two nodes read (x in a written-out RMSNorm): the input the
// argument had (after `input`) is dropped and the later ones renumbered.
v1::Target ReadAgain(v1::Target chain, int node, const std::string& arg, int input) {
  std::string own;
  for (v1::Argument& a : *chain.mutable_nodes(node)->mutable_args()) {
    if (a.name() == arg) own = a.tensor();
  }
  int k = 0;
  while (chain.input_names(k) != own) ++k;
  chain.mutable_input_names()->erase(chain.mutable_input_names()->begin() + k);
  chain.mutable_inputs()->erase(chain.mutable_inputs()->begin() + k);
  const auto renamed = [&](const std::string& name) {
    if (name == own) return "in" + std::to_string(input);
    if (name.rfind("in", 0) != 0) return name;
    const int j = std::stoi(name.substr(2));
    return j > k ? "in" + std::to_string(j - 1) : name;
  };
  for (v1::SubgraphNode& n : *chain.mutable_nodes()) {
    for (v1::Argument& a : *n.mutable_args()) {
      if (a.kind_case() == v1::Argument::kTensor) a.set_tensor(renamed(a.tensor()));
    }
  }
  for (std::string& name : *chain.mutable_input_names()) name = renamed(name);
  return chain;
}

}  // namespace

v1::TensorSignature Dense(std::vector<int64_t> sizes, v1::DType dtype) {
  return DenseSignature(sizes, dtype);
}

v1::TensorSignature Strided(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                            v1::DType dtype) {
  v1::TensorSignature sig = DenseSignature(sizes, dtype);
  sig.clear_strides();
  for (int64_t s : strides) sig.add_strides(s);
  return sig;
}

const std::vector<v1::DType>& FloatDTypes() {
  static const std::vector<v1::DType> dtypes = {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16};
  return dtypes;
}

std::vector<SampleTarget> SampleTargets(v1::DType t, int v) {
  const bool alt = v != 0;
  std::vector<SampleTarget> out;
  auto add = [&](std::string name, std::string family, v1::Target target) {
    out.push_back({std::move(name), std::move(family), std::move(target)});
  };
  using S = std::vector<int64_t>;
  auto pick = [&](S a, S b) { return alt ? b : a; };

  // Row-wise.
  {
    S x = pick({32, 128, 1000}, {7, 3, 4097});
    add("softmax_last", "rowwise",
        TargetBuilder("aten::softmax", "int").Tensor("self", Dense(x, t)).Scalar("dim", Int(-1))
            .Scalar("dtype", None()).Output(Dense(x, t)));
  }
  {
    // Attention scores in half precision, probabilities in float32 (dtype=torch.float32).
    S x = pick({4, 256, 2048}, {3, 7, 1000});
    add("softmax_into_float32", "rowwise",
        TargetBuilder("aten::softmax", "int").Tensor("self", Dense(x, t)).Scalar("dim", Int(-1))
            .Scalar("dtype", Int(6)).Output(Dense(x, v1::FLOAT32)));
  }
  {
    S x = pick({64, 2048}, {5, 33});
    add("_softmax", "rowwise",
        TargetBuilder("aten::_softmax", "").Tensor("self", Dense(x, t)).Scalar("dim", Int(1))
            .Scalar("half_to_float", Bool(false)).Output(Dense(x, t)));
  }
  {
    S x = pick({16, 50257}, {3, 1001});
    add("log_softmax_long_rows", "rowwise",
        TargetBuilder("aten::log_softmax", "int").Tensor("self", Dense(x, t))
            .Scalar("dim", Int(1)).Scalar("dtype", None()).Output(Dense(x, t)));
  }
  {
    S x = pick({16, 197, 768}, {3, 50, 768});
    add("layer_norm_affine", "rowwise",
        TargetBuilder("aten::layer_norm", "").Tensor("input", Dense(x, t))
            .Scalar("normalized_shape", Ints({768})).Tensor("weight", Dense({768}, t))
            .Tensor("bias", Dense({768}, t)).Scalar("eps", Float(1e-5))
            .Scalar("cudnn_enable", Bool(true)).Output(Dense(x, t)));
  }
  {
    S x = pick({4096, 1024}, {77, 1024});
    add("layer_norm_plain", "rowwise",
        TargetBuilder("aten::layer_norm", "").Tensor("input", Dense(x, t))
            .Scalar("normalized_shape", Ints({1024})).Scalar("weight", None())
            .Scalar("bias", None()).Scalar("eps", Float(1e-6))
            .Scalar("cudnn_enable", Bool(true)).Output(Dense(x, t)));
  }
  {
    S x = pick({8, 512, 4096}, {1, 7, 4096});
    add("rms_norm_weight", "rowwise",
        TargetBuilder("aten::rms_norm", "").Tensor("input", Dense(x, t))
            .Scalar("normalized_shape", Ints({4096})).Tensor("weight", Dense({4096}, t))
            .Scalar("eps", Float(1e-6)).Output(Dense(x, t)));
  }
  {
    S x = pick({2048, 128}, {9, 128});
    add("rms_norm_plain", "rowwise",
        TargetBuilder("aten::rms_norm", "").Tensor("input", Dense(x, t))
            .Scalar("normalized_shape", Ints({128})).Scalar("weight", None())
            .Scalar("eps", None()).Output(Dense(x, t)));
  }
  {
    // Attention's `softmax(scores * scale + mask, dtype=float32).to(dtype)`: the scale a
    // float64 scalar on the device, the causal mask spanning whole rows over the heads.
    S x = pick({2, 8, 256, 256}, {1, 3, 40, 40});
    S m = {1, 1, x[2], x[3]};
    std::vector<v1::Target> nodes = {
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense({}, v1::FLOAT64)).Output(Dense(x, t)),
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(m, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)),
        TargetBuilder("aten::softmax", "int").Tensor("self", Dense(x, t)).Scalar("dim", Int(-1))
            .Scalar("dtype", Int(6)).Output(Dense(x, v1::FLOAT32))};
    if (t != v1::FLOAT32) {
      nodes.push_back(TargetBuilder("aten::to", "dtype").Tensor("self", Dense(x, v1::FLOAT32))
                          .Scalar("dtype", Int(TorchDType(t))).Scalar("non_blocking", Bool(false))
                          .Scalar("copy", Bool(false)).Scalar("memory_format", None())
                          .Output(Dense(x, t)));
    }
    add("softmax_attention_chain", "rowwise",
        JoinChain(nodes, std::vector<std::string>(nodes.size() - 1, "self")));
  }
  {
    // A residual add into a layer norm, a GELU after it.
    S x = pick({16, 197, 768}, {3, 50, 768});
    add("layer_norm_chain", "rowwise",
        JoinChain({TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
                       .Tensor("other", Dense(x, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)),
                   TargetBuilder("aten::layer_norm", "").Tensor("input", Dense(x, t))
                       .Scalar("normalized_shape", Ints({768})).Tensor("weight", Dense({768}, t))
                       .Tensor("bias", Dense({768}, t)).Scalar("eps", Float(1e-5))
                       .Scalar("cudnn_enable", Bool(true)).Output(Dense(x, t)),
                   TargetBuilder("aten::gelu", "").Tensor("self", Dense(x, t))
                       .Scalar("approximate", Str("none")).Output(Dense(x, t))},
                  {"input", "self"}));
  }
  // Group norm.
  {
    S x = pick({8, 256, 32, 32}, {2, 256, 17, 9});
    add("group_norm_affine", "group_norm",
        TargetBuilder("aten::group_norm", "").Tensor("input", Dense(x, t))
            .Scalar("num_groups", Int(32)).Tensor("weight", Dense({256}, t))
            .Tensor("bias", Dense({256}, t)).Scalar("eps", Float(1e-5))
            .Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)));
  }
  {
    // A residual add into a group norm, a SiLU after it (a diffusion decoder's block).
    S x = pick({1, 128, 64, 64}, {2, 128, 17, 9});
    add("group_norm_chain", "group_norm",
        JoinChain({TargetBuilder("aten::add", "Tensor")
                       .Tensor("self", Dense(x, t))
                       .Tensor("other", Dense(x, t))
                       .Scalar("alpha", Int(1))
                       .Output(Dense(x, t)),
                   TargetBuilder("aten::group_norm", "")
                       .Tensor("input", Dense(x, t))
                       .Scalar("num_groups", Int(32))
                       .Tensor("weight", Dense({128}, t))
                       .Tensor("bias", Dense({128}, t))
                       .Scalar("eps", Float(1e-6))
                       .Scalar("cudnn_enabled", Bool(true))
                       .Output(Dense(x, t)),
                   TargetBuilder("aten::silu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t))},
                  {"input", "self"}));
  }
  {
    S x = pick({4, 64, 3000}, {2, 64, 77});
    add("group_norm_plain", "group_norm",
        TargetBuilder("aten::group_norm", "").Tensor("input", Dense(x, t))
            .Scalar("num_groups", Int(8)).Scalar("weight", None()).Scalar("bias", None())
            .Scalar("eps", Float(1e-5)).Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)));
  }
  {
    // A VAE block's group norm and SiLU.
    S x = pick({2, 128, 64, 64}, {1, 128, 17, 9});
    add("group_norm_silu_chain", "group_norm",
        JoinChain({TargetBuilder("aten::group_norm", "").Tensor("input", Dense(x, t))
                       .Scalar("num_groups", Int(32)).Tensor("weight", Dense({128}, t))
                       .Tensor("bias", Dense({128}, t)).Scalar("eps", Float(1e-6))
                       .Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)),
                   TargetBuilder("aten::silu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t))},
                  {"self"}));
  }
  {
    // A UNet resnet block's time embedding, added per channel before its group norm and SiLU.
    S x = pick({2, 128, 32, 32}, {1, 128, 17, 9});
    S e = {x[0], x[1], 1, 1};
    add("group_norm_temb_chain", "group_norm",
        JoinChain({TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
                       .Tensor("other", Dense(e, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)),
                   TargetBuilder("aten::group_norm", "").Tensor("input", Dense(x, t))
                       .Scalar("num_groups", Int(32)).Tensor("weight", Dense({128}, t))
                       .Tensor("bias", Dense({128}, t)).Scalar("eps", Float(1e-5))
                       .Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)),
                   TargetBuilder("aten::silu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t))},
                  {"input", "self"}));
  }
  // Batch norm (inference).
  {
    S x = pick({32, 64, 56, 56}, {3, 64, 7, 9});
    add("batch_norm", "batch_norm",
        TargetBuilder("aten::batch_norm", "").Tensor("input", Dense(x, t))
            .Tensor("weight", Dense({64}, t)).Tensor("bias", Dense({64}, t))
            .Tensor("running_mean", Dense({64}, t)).Tensor("running_var", Dense({64}, t))
            .Scalar("training", Bool(false)).Scalar("momentum", Float(0.1))
            .Scalar("eps", Float(1e-5)).Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)));
  }
  {
    // Planes shorter than a vector (a pooled feature map), and a tail past the last vector.
    S x = pick({8, 96, 1, 3}, {2, 37, 1, 3});
    S c = {x[1]};
    add("batch_norm_short_planes", "batch_norm",
        TargetBuilder("aten::batch_norm", "").Tensor("input", Dense(x, t))
            .Tensor("weight", Dense(c, t)).Tensor("bias", Dense(c, t))
            .Tensor("running_mean", Dense(c, t)).Tensor("running_var", Dense(c, t))
            .Scalar("training", Bool(false)).Scalar("momentum", Float(0.1))
            .Scalar("eps", Float(1e-5)).Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t)));
  }
  {
    // Chains after a batch norm: nn.ReLU(inplace=True), and a bottleneck's residual add and
    // ReLU (`out += identity; out = relu(out)`), each one pass.
    S x = pick({8, 64, 28, 28}, {3, 64, 7, 9});
    const v1::Target bn =
        TargetBuilder("aten::batch_norm", "").Tensor("input", Dense(x, t))
            .Tensor("weight", Dense({64}, t)).Tensor("bias", Dense({64}, t))
            .Tensor("running_mean", Dense({64}, t)).Tensor("running_var", Dense({64}, t))
            .Scalar("training", Bool(false)).Scalar("momentum", Float(0.1))
            .Scalar("eps", Float(1e-5)).Scalar("cudnn_enabled", Bool(true)).Output(Dense(x, t));
    const v1::Target relu = TargetBuilder("aten::relu_", "")
                                .Schema("aten::relu_(Tensor(a!) self) -> Tensor(a!)")
                                .Tensor("self", Dense(x, t)).Output(Dense(x, t));
    const v1::Target add_residual =
        TargetBuilder("aten::add_", "Tensor")
            .Schema("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> "
                    "Tensor(a!)")
            .Tensor("self", Dense(x, t)).Tensor("other", Dense(x, t))
            .Scalar("alpha", Int(1)).Output(Dense(x, t));
    add("batch_norm_relu", "batch_norm", JoinChain({bn, relu}, {"self"}));
    add("batch_norm_add_relu", "batch_norm",
        JoinChain({bn, add_residual, relu}, {"self", "self"}));
  }
  // Pooling.
  {
    S x = pick({32, 2048, 7, 7}, {5, 2048, 9, 9});
    S y = pick({32, 2048, 1, 1}, {5, 2048, 1, 1});
    add("adaptive_avg_pool_1x1", "pooling",
        TargetBuilder("aten::adaptive_avg_pool2d", "").Tensor("self", Dense(x, t))
            .Scalar("output_size", Ints({1, 1})).Output(Dense(y, t)));
  }
  {
    S x = pick({8, 512, 14, 14}, {2, 512, 15, 11});
    S y = pick({8, 512, 7, 7}, {2, 512, 7, 7});
    add("adaptive_avg_pool_7x7", "pooling",
        TargetBuilder("aten::adaptive_avg_pool2d", "").Tensor("self", Dense(x, t))
            .Scalar("output_size", Ints({7, 7})).Output(Dense(y, t)));
  }
  {
    S x = pick({16, 64, 56, 56}, {2, 64, 31, 17});
    S y = pick({16, 64, 28, 28}, {2, 64, 16, 9});
    add("avg_pool", "pooling",
        TargetBuilder("aten::avg_pool2d", "").Tensor("self", Dense(x, t))
            .Scalar("kernel_size", Ints({3, 3})).Scalar("stride", Ints({2, 2}))
            .Scalar("padding", Ints({1, 1})).Scalar("ceil_mode", Bool(false))
            .Scalar("count_include_pad", Bool(false)).Scalar("divisor_override", None())
            .Output(Dense(y, t)));
  }
  {
    S x = pick({32, 64, 112, 112}, {2, 64, 33, 20});
    S y = pick({32, 64, 56, 56}, {2, 64, 17, 10});
    add("max_pool", "pooling",
        TargetBuilder("aten::max_pool2d", "").Tensor("self", Dense(x, t))
            .Scalar("kernel_size", Ints({3, 3})).Scalar("stride", Ints({2, 2}))
            .Scalar("padding", Ints({1, 1})).Scalar("dilation", Ints({1, 1}))
            .Scalar("ceil_mode", Bool(false)).Output(Dense(y, t)));
  }
  // Reductions.
  {
    S x = pick({64, 4096}, {5, 33});
    S y = pick({64}, {5});
    add("sum_last", "reduction",
        TargetBuilder("aten::sum", "dim_IntList").Tensor("self", Dense(x, t))
            .Scalar("dim", Ints({-1})).Scalar("keepdim", Bool(false)).Scalar("dtype", None())
            .Output(Dense(y, t)));
  }
  {
    S x = pick({32, 197, 768}, {3, 50, 100});
    S y = pick({32, 768}, {3, 100});
    add("mean_middle", "reduction",
        TargetBuilder("aten::mean", "dim").Tensor("self", Dense(x, t))
            .Scalar("dim", Ints({1})).Scalar("keepdim", Bool(false)).Scalar("dtype", None())
            .Output(Dense(y, t)));
  }
  {
    S x = pick({256, 1000}, {3, 17});
    S y = pick({256, 1}, {3, 1});
    add("amax_last_keepdim", "reduction",
        TargetBuilder("aten::amax", "").Tensor("self", Dense(x, t)).Scalar("dim", Ints({1}))
            .Scalar("keepdim", Bool(true)).Output(Dense(y, t)));
  }
  {
    S x = pick({4096, 16, 7}, {100, 3, 5});
    S y = pick({16, 7}, {3, 5});
    add("amin_first", "reduction",
        TargetBuilder("aten::amin", "").Tensor("self", Dense(x, t)).Scalar("dim", Ints({0}))
            .Scalar("keepdim", Bool(false)).Output(Dense(y, t)));
  }
  {
    S x = pick({64, 32000}, {2, 999});
    S y = pick({64}, {2});
    add("argmax_last", "reduction",
        TargetBuilder("aten::argmax", "").Tensor("self", Dense(x, t)).Scalar("dim", Int(-1))
            .Scalar("keepdim", Bool(false)).Output(Dense(y, v1::INT64)));
  }
  {
    S x = pick({1000, 100}, {13, 7});
    add("argmax_flat", "reduction",
        TargetBuilder("aten::argmax", "").Tensor("self", Dense(x, t)).Scalar("dim", None())
            .Scalar("keepdim", Bool(false)).Output(Dense({}, v1::INT64)));
  }
  {
    S x = pick({8, 64, 32, 32}, {2, 64, 5, 3});
    S y = pick({8, 1, 1, 1}, {2, 1, 1, 1});
    add("sum_trailing_keepdim", "reduction",
        TargetBuilder("aten::sum", "dim_IntList").Tensor("self", Dense(x, t))
            .Scalar("dim", Ints({1, 2, 3})).Scalar("keepdim", Bool(true)).Scalar("dtype", None())
            .Output(Dense(y, t)));
  }
  {
    // RMSNorm written out, as Llama, Qwen3 and T5 write it: `x * rsqrt(x.pow(2).mean(-1,
    // keepdim=True) + eps)` on the hidden state in float32, then `weight * h.to(dtype)`: the
    // mean broadcast back over its row. The hidden state, read by pow and by the mul, is one
    // input, as capture names it; Gemma's form below keeps two, as a model passing two equal
    // tensors would.
    const v1::DType f = v1::FLOAT32;
    S x = pick({2, 1024, 1024}, {3, 7, 96});
    S r = {x[0], x[1], 1};
    std::vector<v1::Target> nodes = {
        TargetBuilder("aten::pow", "Tensor_Scalar").Tensor("self", Dense(x, f))
            .Scalar("exponent", Int(2)).Output(Dense(x, f)),
        TargetBuilder("aten::mean", "dim").Tensor("self", Dense(x, f)).Scalar("dim", Ints({-1}))
            .Scalar("keepdim", Bool(true)).Scalar("dtype", None()).Output(Dense(r, f)),
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(r, f))
            .Scalar("other", Float(1e-6)).Scalar("alpha", Int(1)).Output(Dense(r, f)),
        TargetBuilder("aten::rsqrt", "").Tensor("self", Dense(r, f)).Output(Dense(r, f)),
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, f))
            .Tensor("other", Dense(r, f)).Output(Dense(x, f))};
    std::vector<std::string> links = {"self", "self", "self", "other"};
    if (t != f) {
      nodes.push_back(TargetBuilder("aten::to", "dtype").Tensor("self", Dense(x, f))
                          .Scalar("dtype", Int(TorchDType(t))).Scalar("non_blocking", Bool(false))
                          .Scalar("copy", Bool(false)).Scalar("memory_format", None())
                          .Output(Dense(x, t)));
      links.push_back("self");
    }
    nodes.push_back(TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense({x[2]}, t))
                        .Tensor("other", Dense(x, t)).Output(Dense(x, t)));
    links.push_back("other");
    add("mean_broadcast_rms_norm", "reduction", ReadAgain(JoinChain(nodes, links), 4, "self", 0));
    if (t != f) {
      // Gemma's: `(x * rsqrt(...)) * (1.0 + weight.float())`, then `.type_as(x)`.
      nodes.resize(5);
      links.resize(4);
      nodes.push_back(TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, f))
                          .Tensor("other", Dense({x[2]}, f)).Output(Dense(x, f)));
      nodes.push_back(TargetBuilder("aten::type_as", "").Tensor("self", Dense(x, f))
                          .Tensor("other", Dense(x, t)).Output(Dense(x, t)));
      links.insert(links.end(), {"self", "self"});
      add("mean_broadcast_gemma_norm", "reduction", JoinChain(nodes, links));
    }
  }
  {
    // Gemma3's q/k norms, which normalize the heads after the transpose: x is [B,H,S,D] viewed
    // from [B,S,H,D] (rows dense, not adjacent), the output in x's layout, as eager lays it out.
    const v1::DType f = v1::FLOAT32;
    S x = pick({1, 8, 2048, 64}, {2, 3, 5, 16});
    const std::vector<int64_t> strides = {x[1] * x[2] * x[3], x[3], x[1] * x[3], 1};
    S r = {x[0], x[1], x[2], 1};
    std::vector<v1::Target> nodes = {
        TargetBuilder("aten::pow", "Tensor_Scalar").Tensor("self", Strided(x, strides, f))
            .Scalar("exponent", Int(2)).Output(Strided(x, strides, f)),
        TargetBuilder("aten::mean", "dim").Tensor("self", Strided(x, strides, f))
            .Scalar("dim", Ints({-1})).Scalar("keepdim", Bool(true)).Scalar("dtype", None())
            .Output(Dense(r, f)),
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(r, f))
            .Scalar("other", Float(1e-6)).Scalar("alpha", Int(1)).Output(Dense(r, f)),
        TargetBuilder("aten::rsqrt", "").Tensor("self", Dense(r, f)).Output(Dense(r, f)),
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Strided(x, strides, f))
            .Tensor("other", Dense(r, f)).Output(Strided(x, strides, f)),
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Strided(x, strides, f))
            .Tensor("other", Dense({x[3]}, f)).Output(Strided(x, strides, f))};
    std::vector<std::string> links = {"self", "self", "self", "other", "self"};
    if (t != f) {
      nodes.push_back(TargetBuilder("aten::type_as", "").Tensor("self", Strided(x, strides, f))
                          .Tensor("other", Strided(x, strides, t))
                          .Output(Strided(x, strides, t)));
      links.push_back("self");
    }
    add("mean_broadcast_head_norm", "reduction", ReadAgain(JoinChain(nodes, links), 4, "self", 0));
  }
  // Elementwise.
  {
    S x = pick({32, 64, 56, 56}, {3, 5, 7, 9});
    add("relu", "elementwise",
        TargetBuilder("aten::relu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t)));
    add("silu", "elementwise",
        TargetBuilder("aten::silu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t)));
    add("sigmoid", "elementwise",
        TargetBuilder("aten::sigmoid", "").Tensor("self", Dense(x, t)).Output(Dense(x, t)));
    add("tanh", "elementwise",
        TargetBuilder("aten::tanh", "").Tensor("self", Dense(x, t)).Output(Dense(x, t)));
    for (const char* op : {"neg", "abs", "exp", "sqrt", "rsqrt", "sin", "cos", "log", "log1p",
                           "reciprocal", "erf", "hardsigmoid", "hardswish", "mish", "relu6"}) {
      add(op, "elementwise",
          TargetBuilder(absl::StrCat("aten::", op), "").Tensor("self", Dense(x, t))
              .Output(Dense(x, t)));
    }
    // The activations with numbers (aten's schema names), and clamps to one or two bounds.
    add("leaky_relu", "elementwise",
        TargetBuilder("aten::leaky_relu", "").Tensor("self", Dense(x, t))
            .Scalar("negative_slope", Float(0.1)).Output(Dense(x, t)));
    add("hardtanh", "elementwise",
        TargetBuilder("aten::hardtanh", "").Tensor("self", Dense(x, t))
            .Scalar("min_val", Float(-0.5)).Scalar("max_val", Float(0.75)).Output(Dense(x, t)));
    add("clamp_min_only", "elementwise",
        TargetBuilder("aten::clamp", "").Tensor("self", Dense(x, t))
            .Scalar("min", Float(-0.3)).Scalar("max", None()).Output(Dense(x, t)));
    add("clamp_max", "elementwise",
        TargetBuilder("aten::clamp_max", "").Tensor("self", Dense(x, t))
            .Scalar("max", Float(0.1)).Output(Dense(x, t)));
    add("elu", "elementwise",
        TargetBuilder("aten::elu", "").Tensor("self", Dense(x, t)).Scalar("alpha", Float(1.5))
            .Scalar("scale", Int(1)).Scalar("input_scale", Int(1)).Output(Dense(x, t)));
    add("softplus", "elementwise",
        TargetBuilder("aten::softplus", "").Tensor("self", Dense(x, t)).Scalar("beta", Float(2))
            .Scalar("threshold", Int(1)).Output(Dense(x, t)));
    // In place (ResNet's ReLU(inplace=True) and residual `out += identity`): the output is self.
    add("relu_in_place", "elementwise",
        TargetBuilder("aten::relu_", "").Schema("aten::relu_(Tensor(a!) self) -> Tensor(a!)")
            .Tensor("self", Dense(x, t)).Output(Dense(x, t)));
    add("add_in_place", "elementwise",
        TargetBuilder("aten::add_", "Tensor")
            .Schema("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> "
                    "Tensor(a!)")
            .Tensor("self", Dense(x, t)).Tensor("other", Dense(x, t)).Scalar("alpha", Int(1))
            .Output(Dense(x, t)));
    // An RMS norm's square: hidden.pow(2).
    add("pow_square", "elementwise",
        TargetBuilder("aten::pow", "Tensor_Scalar").Tensor("self", Dense(x, t))
            .Scalar("exponent", Int(2)).Output(Dense(x, t)));
  }
  {
    // x.to(other float type): Qwen3's float32 attention probabilities into bfloat16.
    S x = pick({1, 8, 2048, 2048}, {2, 3, 7, 9});
    for (v1::DType to : FloatDTypes()) {
      if (to == t) continue;
      add("to_" + DTypeName(to), "elementwise",
          TargetBuilder("aten::to", "dtype").Tensor("self", Dense(x, t))
              .Scalar("dtype", Int(TorchDType(to))).Scalar("non_blocking", Bool(false))
              .Scalar("copy", Bool(false)).Scalar("memory_format", None()).Output(Dense(x, to)));
      // Gemma's `output.type_as(x)`: the same conversion, to the dtype of a tensor not read.
      add(absl::StrCat("to_", DTypeName(to), "_by_type_as"), "elementwise",
          TargetBuilder("aten::type_as", "").Tensor("self", Dense(x, t))
              .Tensor("other", Dense(x, to)).Output(Dense(x, to)));
    }
  }
  {
    S x = pick({16, 197, 3072}, {2, 3, 1001});
    add("gelu_erf", "elementwise",
        TargetBuilder("aten::gelu", "").Tensor("self", Dense(x, t))
            .Scalar("approximate", Str("none")).Output(Dense(x, t)));
    add("gelu_tanh", "elementwise",
        TargetBuilder("aten::gelu", "").Tensor("self", Dense(x, t))
            .Scalar("approximate", Str("tanh")).Output(Dense(x, t)));
  }
  {
    S x = pick({32, 197, 768}, {2, 9, 768});
    add("add_broadcast", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense({768}, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)));
    add("add_alpha", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(x, t)).Scalar("alpha", Float(0.5)).Output(Dense(x, t)));
  }
  {
    // Views read through their strides into a dense output: half of each row, as a rotary
    // embedding slices `x[..., :d/2]` (times a table over positions, and negated), and a bias
    // expanded over the rows (stride 0).
    S x = pick({2, 8, 128, 32}, {3, 5, 7, 6});
    const S sliced = {x[1] * x[2] * 2 * x[3], x[2] * 2 * x[3], 2 * x[3], 1};
    add("mul_sliced", "elementwise",
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Strided(x, sliced, t))
            .Tensor("other", Dense({x[2], x[3]}, t)).Output(Dense(x, t)));
    add("neg_sliced", "elementwise",
        TargetBuilder("aten::neg", "").Tensor("self", Strided(x, sliced, t)).Output(Dense(x, t)));
    // q [B,H,S,D] viewed from [B,S,H,D] times cos: eager lays the product out as q.
    const S transposed = {x[2] * x[1] * x[3], x[3], x[1] * x[3], 1};
    add("mul_transposed", "elementwise",
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Strided(x, transposed, t))
            .Tensor("other", Dense({1, 1, x[2], x[3]}, t))
            .Output(Strided(x, transposed, t)));
    S y = pick({64, 1024}, {9, 33});
    add("add_expanded", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(y, t))
            .Tensor("other", Strided(y, {0, 1}, t)).Scalar("alpha", Int(1)).Output(Dense(y, t)));
  }
  {
    S x = pick({8, 64, 56, 56}, {2, 64, 3, 5});
    S s = pick({8, 64, 1, 1}, {2, 64, 1, 1});
    add("mul_broadcast", "elementwise",
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(s, t)).Output(Dense(x, t)));
  }
  {
    // A causal mask shared by every batch and head: one (query, key) plane per output row.
    S x = pick({2, 8, 128, 128}, {3, 2, 9, 40});
    S m = pick({1, 1, 128, 128}, {1, 1, 9, 40});
    add("add_causal_mask", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(m, t))
            .Tensor("other", Dense(x, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)));
  }
  {
    // An attention mask: broadcast over heads, read whole over the (query, key) plane.
    S x = pick({2, 8, 256, 256}, {2, 3, 17, 24});
    S m = pick({2, 1, 256, 256}, {2, 1, 17, 24});
    add("add_attention_mask", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(m, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)));
  }
  {
    // Attention scores times a traced Python number (a 0-dim CPU f64 tensor the capture
    // records by value), and a residual plus a number with alpha.
    S x = pick({2, 8, 256, 256}, {2, 3, 17, 24});
    add("mul_number", "elementwise",
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
            .Scalar("other", Float(0.08838834764831845)).Output(Dense(x, t)));
    add("add_number", "elementwise",
        TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
            .Scalar("other", Int(1)).Scalar("alpha", Float(0.5)).Output(Dense(x, t)));
    // An inverted attention mask: 1.0 - mask (rsub.Scalar).
    add("rsub_scalar", "elementwise",
        TargetBuilder("aten::rsub", "Scalar").Tensor("self", Dense(x, t))
            .Scalar("other", Float(1.0)).Scalar("alpha", Int(1)).Output(Dense(x, t)));
    add("div_number", "elementwise",
        TargetBuilder("aten::div", "Tensor").Tensor("self", Dense(x, t))
            .Scalar("other", Float(11.313708498984761)).Output(Dense(x, t)));
    // Padding masked out of attention scores (a bool mask broadcast over heads), and a whole
    // tensor zeroed where a mask of its own shape says.
    S m = pick({2, 1, 256, 256}, {2, 1, 17, 24});
    add("masked_fill_broadcast", "elementwise",
        TargetBuilder("aten::masked_fill", "Scalar").Tensor("self", Dense(x, t))
            .Tensor("mask", Dense(m, v1::BOOL)).Scalar("value", Float(-10000.0))
            .Output(Dense(x, t)));
    add("masked_fill_flat", "elementwise",
        TargetBuilder("aten::masked_fill", "Scalar").Tensor("self", Dense(x, t))
            .Tensor("mask", Dense(x, v1::BOOL)).Scalar("value", Int(0)).Output(Dense(x, t)));
    // where(mask, scores, number) and where(mask, number, x): the number recorded by value.
    add("where_number_other", "elementwise",
        TargetBuilder("aten::where", "self").Tensor("condition", Dense(m, v1::BOOL))
            .Tensor("self", Dense(x, t)).Scalar("other", Float(-1e4)).Output(Dense(x, t)));
    add("where_number_self", "elementwise",
        TargetBuilder("aten::where", "ScalarSelf").Tensor("condition", Dense(x, v1::BOOL))
            .Scalar("self", Float(0.5)).Tensor("other", Dense(x, t)).Output(Dense(x, t)));
    // The scale as a 0-dim float64 tensor the model keeps on the device.
    add("mul_device_scalar", "elementwise",
        TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense({}, v1::FLOAT64)).Output(Dense(x, t)));
  }
  {
    // x - alpha * y, and x / y with y broadcast over the rows (a norm's divisor).
    S x = pick({32, 512, 768}, {3, 7, 40});
    S r = pick({32, 512, 1}, {3, 7, 1});
    add("sub_alpha", "elementwise",
        TargetBuilder("aten::sub", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(x, t)).Scalar("alpha", Float(2)).Output(Dense(x, t)));
    add("div_broadcast", "elementwise",
        TargetBuilder("aten::div", "Tensor").Tensor("self", Dense(x, t))
            .Tensor("other", Dense(r, t)).Output(Dense(x, t)));
  }
  {
    // Chains of elementwise nodes: a SwiGLU's silu(gate) * up, a decoder's residual sum over a
    // scale ((x + residual) / 1.4142), and a GELU of a biased activation (bias over the rows).
    S x = pick({4, 512, 1536}, {3, 7, 1536});
    add("silu_mul_chain", "elementwise",
        JoinChain({TargetBuilder("aten::silu", "").Tensor("self", Dense(x, t)).Output(Dense(x, t)),
                   TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
                       .Tensor("other", Dense(x, t)).Output(Dense(x, t))},
                  {"self"}));
    add("add_div_chain", "elementwise",
        JoinChain({TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
                       .Tensor("other", Dense(x, t)).Scalar("alpha", Int(1)).Output(Dense(x, t)),
                   TargetBuilder("aten::div", "Tensor").Tensor("self", Dense(x, t))
                       .Scalar("other", Float(1.4142135623730951)).Output(Dense(x, t))},
                  {"self"}));
    add("add_gelu_chain", "elementwise",
        JoinChain({TargetBuilder("aten::add", "Tensor").Tensor("self", Dense(x, t))
                       .Tensor("other", Dense({x[2]}, t)).Scalar("alpha", Int(1))
                       .Output(Dense(x, t)),
                   TargetBuilder("aten::gelu", "").Tensor("self", Dense(x, t))
                       .Scalar("approximate", Str("tanh")).Output(Dense(x, t))},
                  {"self"}));
    // SiLU written out, `x * torch.sigmoid(x)`: the mul reads the chain's input again.
    add("sigmoid_mul_self_chain", "elementwise",
        ReadAgain(JoinChain({TargetBuilder("aten::sigmoid", "").Tensor("self", Dense(x, t))
                                 .Output(Dense(x, t)),
                             TargetBuilder("aten::mul", "Tensor").Tensor("self", Dense(x, t))
                                 .Tensor("other", Dense(x, t)).Output(Dense(x, t))},
                            {"other"}),
                  1, "self", 0));
  }
  // Layout copies of strided views into contiguous outputs.
  {
    // Attention's output back to tokens: [B,H,S,D].transpose(1, 2).contiguous().
    S x = pick({2, 128, 8, 64}, {3, 9, 2, 16});
    const int64_t s = x[1], h = x[2], d = x[3];
    add("contiguous_transpose", "layout",
        TargetBuilder("aten::contiguous", "")
            .Tensor("self", Strided(x, {h * s * d, d, s * d, 1}, t))
            .Scalar("memory_format", Int(0)).Output(Dense(x, t)));
    // A key/value head repeated for grouped-query attention: expand, then reshape.
    S kv = pick({1, 4, 2, 256, 64}, {2, 2, 3, 5, 16});
    const std::vector<int64_t> kv_strides = {kv[1] * kv[3] * kv[4], kv[3] * kv[4], 0, kv[4], 1};
    add("reshape_repeated_heads", "layout",
        TargetBuilder("aten::reshape", "").Tensor("self", Strided(kv, kv_strides, t))
            .Scalar("shape", Ints({kv[0], kv[1] * kv[2], kv[3], kv[4]}))
            .Output(Dense({kv[0], kv[1] * kv[2], kv[3], kv[4]}, t)));
    // The last two dims swapped: every read is a gather.
    S m = pick({4, 80, 96}, {2, 7, 5});
    add("clone_transpose_last", "layout",
        TargetBuilder("aten::clone", "").Tensor("self", Strided(m, {m[1] * m[2], 1, m[1]}, t))
            .Scalar("memory_format", Int(0)).Output(Dense(m, t)));
    // Nearest-neighbour upsampling by 2 in both spatial dims (a VAE decoder's, a UNet's), and
    // to given sizes, 3 times the rows and twice the columns (the default overload).
    S u = pick({2, 64, 32, 32}, {1, 3, 5, 7});
    add("upsample_nearest2d", "layout",
        TargetBuilder("aten::upsample_nearest2d", "vec").Tensor("input", Dense(u, t))
            .Scalar("output_size", None()).Scalar("scale_factors", Floats({2.0, 2.0}))
            .Output(Dense({u[0], u[1], 2 * u[2], 2 * u[3]}, t)));
    // A channels-last input (a UNet's after attention): eager's output is channels-last too.
    auto channels_last = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
      return Strided({n, c, h, w}, {c * h * w, 1, w * c, c}, t);
    };
    add("upsample_nearest2d_channels_last", "layout",
        TargetBuilder("aten::upsample_nearest2d", "vec")
            .Tensor("input", channels_last(u[0], u[1], u[2], u[3]))
            .Scalar("output_size", None()).Scalar("scale_factors", Floats({2.0, 2.0}))
            .Output(channels_last(u[0], u[1], 2 * u[2], 2 * u[3])));
    add("upsample_nearest2d_sizes", "layout",
        TargetBuilder("aten::upsample_nearest2d", "").Tensor("self", Dense(u, t))
            .Scalar("output_size", Ints({3 * u[2], 2 * u[3]})).Scalar("scales_h", None())
            .Scalar("scales_w", None()).Output(Dense({u[0], u[1], 3 * u[2], 2 * u[3]}, t)));
  }
  return out;
}

std::vector<int64_t> IntArgs(const v1::Target& target) {
  std::vector<int64_t> ints;
  for (const v1::Argument& arg : target.nodes(0).args()) {
    if (arg.kind_case() != v1::Argument::kScalar) continue;
    const v1::ScalarValue& s = arg.scalar();
    switch (s.value_case()) {
      case v1::ScalarValue::kIntValue: ints.push_back(s.int_value()); break;
      case v1::ScalarValue::kBoolValue: ints.push_back(s.bool_value() ? 1 : 0); break;
      case v1::ScalarValue::kIntList:
        for (int64_t x : s.int_list().values()) ints.push_back(x);
        break;
      default: break;
    }
  }
  return ints;
}

std::vector<Config> ValidSample(const KernelGenerator& generator, int count, uint64_t seed) {
  SeededRng rng(seed);
  std::vector<Config> out;
  std::set<std::string> seen;
  for (int tries = 0; tries < 20000 && static_cast<int>(out.size()) < count; ++tries) {
    Config c = generator.Canonicalize(generator.Space().Sample(rng));
    if (!generator.Check(c).empty() || !seen.insert(c.ToString()).second) continue;
    out.push_back(c);
  }
  return out;
}

std::unique_ptr<KernelGenerator> BindForTest(const v1::Target& target) {
  std::string refusal;
  const Family* family = FamilyRegistry::Default().Find(target, &refusal);
  EXPECT_NE(family, nullptr) << target.nodes(0).op() << ": " << refusal;
  if (family == nullptr) return nullptr;
  auto generator = family->Bind(target, GpuModel{});
  EXPECT_TRUE(generator.ok()) << generator.status();
  return generator.ok() ? std::move(*generator) : nullptr;
}

}  // namespace kforge::synth::testing
