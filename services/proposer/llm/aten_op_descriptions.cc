// Semantics of common aten ops for LLM prompts.
#include "services/proposer/llm/aten_op_descriptions.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kforge {
namespace {

const absl::flat_hash_map<std::string_view, std::string_view>& Descriptions() {
  static const auto* descriptions = new absl::flat_hash_map<std::string_view, std::string_view>{
      {"aten::softmax",
       "softmax along `dim`: y = exp(x - max(x)) / sum(exp(x - max(x))) over that dimension; "
       "if `dtype` is given, x is first cast to it. Subtract the row max for stability."},
      {"aten::_softmax",
       "softmax along `dim` (internal form): y = exp(x - max) / sum(exp(x - max)); when "
       "half_to_float is true a half input yields a float output."},
      {"aten::log_softmax",
       "log-softmax along `dim`: y = x - max - log(sum(exp(x - max))) over that dimension."},
      {"aten::_log_softmax",
       "log-softmax along `dim` (internal form): y = x - max - "
       "log(sum(exp(x - max)))."},
      {"aten::layer_norm",
       "layer normalization over the last len(normalized_shape) dims: y = (x - mean) / "
       "sqrt(var + eps) * weight + bias, biased variance, statistics in float; weight/bias "
       "optional (None: 1 and 0)."},
      {"aten::native_layer_norm",
       "layer normalization over the trailing normalized_shape dims; returns (y, mean, rstd) "
       "with y = (x - mean) * rstd * weight + bias and rstd = 1/sqrt(biased var + eps)."},
      {"aten::rms_norm",
       "RMS normalization over the trailing normalized_shape dims: y = x / sqrt(mean(x^2) + "
       "eps) * weight (eps None: the dtype's epsilon)."},
      {"aten::group_norm",
       "group normalization: channels (dim 1) split into num_groups groups; each (sample, "
       "group) normalized over its channels and spatial positions: y = (x - mean) / sqrt(var "
       "+ eps) * weight[c] + bias[c]."},
      {"aten::native_group_norm",
       "group normalization over (N, C, HxW) with `group` groups; returns (y, mean, rstd)."},
      {"aten::batch_norm",
       "batch normalization; in inference (training=false) y = (x - running_mean[c]) / "
       "sqrt(running_var[c] + eps) * weight[c] + bias[c] with c the channel (dim 1)."},
      {"aten::add", "elementwise out = self + alpha * other, with broadcasting."},
      {"aten::add_", "in-place self += alpha * other, with broadcasting of other."},
      {"aten::sub", "elementwise out = self - alpha * other, with broadcasting."},
      {"aten::mul", "elementwise out = self * other, with broadcasting."},
      {"aten::div",
       "elementwise out = self / other, with broadcasting (rounding_mode None: "
       "true division)."},
      {"aten::relu", "elementwise max(x, 0)."},
      {"aten::relu_", "in-place elementwise max(x, 0)."},
      {"aten::gelu",
       "elementwise GELU: approximate='none': 0.5*x*(1+erf(x/sqrt(2))); 'tanh': "
       "0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))."},
      {"aten::silu", "elementwise SiLU: x * sigmoid(x) = x / (1 + exp(-x))."},
      {"aten::sigmoid", "elementwise 1 / (1 + exp(-x))."},
      {"aten::tanh", "elementwise tanh(x)."},
      {"aten::exp", "elementwise exp(x)."},
      {"aten::rsqrt", "elementwise 1 / sqrt(x)."},
      {"aten::pow", "elementwise self ** exponent."},
      {"aten::neg", "elementwise -x."},
      {"aten::hardtanh", "elementwise clamp(x, min_val, max_val)."},
      {"aten::relu6", "elementwise clamp(x, 0, 6)."},
      {"aten::leaky_relu", "elementwise x > 0 ? x : x * negative_slope."},
      {"aten::elu",
       "elementwise x > 0 ? x * scale : expm1(x * input_scale) * alpha * scale."},
      {"aten::softplus",
       "elementwise x * beta > threshold ? x : log1p(exp(x * beta)) / beta."},
      {"aten::hardsigmoid", "elementwise min(max(x + 3, 0), 6) / 6."},
      {"aten::hardswish", "elementwise x * min(max(x + 3, 0), 6) / 6."},
      {"aten::mish", "elementwise x * tanh(log1p(exp(x)))."},
      {"aten::clamp", "elementwise clamp(x, min, max) (a None bound is not applied)."},
      {"aten::where", "elementwise condition ? self : other, with broadcasting."},
      {"aten::masked_fill", "out = self with value written where mask is true (mask broadcasts)."},
      {"aten::sum",
       "sum over `dim` (all dims if None), keepdim keeps reduced dims as size 1; "
       "accumulate in float for half inputs."},
      {"aten::mean",
       "mean over `dim` (all dims if None), keepdim keeps reduced dims as size 1; "
       "accumulate in float for half inputs."},
      {"aten::amax", "maximum over `dim`, keepdim keeps reduced dims as size 1."},
      {"aten::var", "variance over `dim` with the given correction (Bessel by default)."},
      {"aten::max_pool2d",
       "2-D max pooling over (H, W) of an (N, C, H, W) input with kernel_size, stride (empty: "
       "kernel_size), padding (implicit -inf), dilation and ceil_mode."},
      {"aten::avg_pool2d",
       "2-D average pooling over (H, W) with kernel_size, stride, padding; count_include_pad "
       "decides whether padding counts in the divisor; divisor_override replaces it."},
      {"aten::adaptive_avg_pool2d",
       "adaptive 2-D average pooling to output_size: output cell (i, j) averages input rows "
       "floor(i*H/oh) .. ceil((i+1)*H/oh) and the same for columns."},
      {"aten::mm", "matrix product self (n x k) @ mat2 (k x m)."},
      {"aten::bmm", "batched matrix product self (b x n x k) @ mat2 (b x k x m)."},
      {"aten::addmm", "beta * self + alpha * (mat1 @ mat2)."},
      {"aten::linear", "y = input @ weight^T + bias (bias optional) over the last dim of input."},
      {"aten::matmul", "matrix product with broadcasting of batch dims."},
      {"aten::embedding",
       "rows of weight gathered by indices: out[..., :] = weight[indices[...], "
       ":]."},
      {"aten::cat", "concatenation of the tensors along `dim`."},
      {"aten::contiguous", "a copy of self in contiguous (row-major) layout."},
      {"aten::clone", "a copy of self (memory_format decides the output layout)."},
      {"aten::copy_", "copies src into self (with broadcasting and dtype conversion)."},
      {"aten::transpose", "view with dims dim0 and dim1 swapped."},
      {"aten::scaled_dot_product_attention",
       "attention: softmax(query @ key^T * scale + attn_mask) @ value over the last two dims; "
       "scale None means 1/sqrt(head_dim); is_causal masks j > i."},
  };
  return *descriptions;
}

}  // namespace

std::string_view KnownAtenOpDescription(std::string_view op) {
  auto it = Descriptions().find(op);
  return it == Descriptions().end() ? std::string_view() : it->second;
}

std::string DescribeAtenOp(const v1::SubgraphNode& node) {
  if (std::string_view known = KnownAtenOpDescription(node.op()); !known.empty()) {
    return std::string(known);
  }
  absl::string_view name = node.op();
  absl::ConsumePrefix(&name, "aten::");
  if (!node.schema().empty()) {
    return absl::StrCat("computes ", name, " exactly as PyTorch's aten op with the schema `",
                        node.schema(),
                        "` does (same semantics, broadcasting, type promotion and output "
                        "layout as torch.",
                        name, ").");
  }
  return absl::StrCat("computes ", name, " exactly as PyTorch's ", node.op(), " does.");
}

}  // namespace kforge
