#include "common/op_cost.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "common/tensor_signature.h"

namespace kforge {
namespace {

int64_t Bytes(const v1::TensorSignature& sig) { return Numel(sig) * ElementSize(sig.dtype()); }

int64_t MaxNumel(const google::protobuf::RepeatedPtrField<v1::TensorSignature>& sigs) {
  int64_t n = 0;
  for (const auto& s : sigs) n = std::max(n, Numel(s));
  return n;
}

// FLOPs per element of the largest tensor for ops that touch each element a fixed number of
// times: an add is 1, a softmax max+sub+exp+sum+div ~5, a GELU or SiLU ~8.
const absl::flat_hash_map<std::string, int>& PerElementFlops() {
  static const auto* table = new absl::flat_hash_map<std::string, int>{
      {"aten::add", 1}, {"aten::sub", 1}, {"aten::mul", 1}, {"aten::div", 1},
      {"aten::relu", 1}, {"aten::clamp", 1}, {"aten::neg", 1}, {"aten::abs", 1},
      {"aten::pow", 1}, {"aten::rsqrt", 2}, {"aten::sqrt", 2}, {"aten::exp", 4},
      {"aten::sigmoid", 5}, {"aten::tanh", 6}, {"aten::silu", 6}, {"aten::gelu", 8},
      {"aten::softmax", 5}, {"aten::_softmax", 5}, {"aten::log_softmax", 6},
      {"aten::_log_softmax", 6}, {"aten::layer_norm", 8}, {"aten::native_layer_norm", 8},
      {"aten::rms_norm", 6}, {"aten::group_norm", 8}, {"aten::native_group_norm", 8},
      {"aten::batch_norm", 2}, {"aten::_native_batch_norm_legit_no_training", 2},
      {"aten::sum", 1}, {"aten::mean", 1}, {"aten::amax", 1}, {"aten::amin", 1},
      {"aten::max", 1}, {"aten::min", 1}, {"aten::argmax", 1}, {"aten::argmin", 1},
      {"aten::adaptive_avg_pool2d", 1}, {"aten::avg_pool2d", 1}, {"aten::max_pool2d", 1},
  };
  return *table;
}

bool LowPrecision(const v1::TensorSignature& sig) {
  return sig.dtype() == v1::FLOAT16 || sig.dtype() == v1::BFLOAT16;
}

// GEMM and convolution FLOPs of a single-node target; 0 when `op` is neither.
int64_t MatmulFlops(const std::string& op, const v1::Target& t) {
  if (t.inputs_size() < 2 || t.outputs_size() < 1) return 0;
  const v1::TensorSignature& a = t.inputs(0);
  const v1::TensorSignature& b = t.inputs(1);
  const int64_t out = Numel(t.outputs(0));
  if (a.sizes_size() == 0 || b.sizes_size() == 0) return 0;
  if (op == "aten::mm" || op == "aten::bmm" || op == "aten::matmul" || op == "aten::linear") {
    // Every output element is a dot product over the first input's last dim.
    return 2 * out * a.sizes(a.sizes_size() - 1);
  }
  if (op == "aten::addmm" || op == "aten::baddbmm") {
    // (bias, a, b): the GEMM plus the bias add.
    if (t.inputs_size() < 3) return 0;
    const v1::TensorSignature& lhs = t.inputs(1);
    return 2 * out * lhs.sizes(lhs.sizes_size() - 1) + out;
  }
  if (op == "aten::conv2d" || op == "aten::convolution" || op == "aten::_convolution" ||
      op == "aten::conv1d" || op == "aten::conv3d" || op == "aten::cudnn_convolution") {
    // Weight [C_out, C_in/groups, k...]: each output element reduces over numel(w)/C_out.
    if (b.sizes(0) <= 0) return 0;
    return 2 * out * (Numel(b) / b.sizes(0));
  }
  return 0;
}

}  // namespace

OpCost EstimateOpCost(const v1::Target& target) {
  OpCost cost;
  for (const auto& s : target.inputs()) cost.min_bytes += Bytes(s);
  for (const auto& s : target.outputs()) cost.min_bytes += Bytes(s);
  if (target.nodes_size() == 1) {
    const std::string& op = target.nodes(0).op();
    if (int64_t gemm = MatmulFlops(op, target); gemm > 0) {
      cost.min_flops = gemm;
      // fp32 GEMMs run on CUDA cores under PyTorch's default ("highest") matmul precision;
      // cuDNN convolutions may use TF32 by default.
      cost.tensor_cores = LowPrecision(target.inputs(0)) || op.find("conv") != std::string::npos;
      return cost;
    }
  }
  // A chain of per-element ops: each node touches at most the largest tensor once.
  const int64_t elements = std::max(MaxNumel(target.inputs()), MaxNumel(target.outputs()));
  for (const auto& node : target.nodes()) {
    auto it = PerElementFlops().find(node.op());
    if (it == PerElementFlops().end()) return OpCost{cost.min_bytes, 0, false};  // unknown op
    cost.min_flops += it->second * elements;
  }
  return cost;
}

void SetOpCost(v1::Target& target) {
  const OpCost cost = EstimateOpCost(target);
  target.set_min_bytes_moved(cost.min_bytes);
  target.set_min_flops(cost.min_flops);
  target.set_tensor_core_op(cost.tensor_cores);
}

double FloorSeconds(const v1::Target& target, const v1::GpuInfo& gpu) {
  if (gpu.copy_bandwidth_bytes_per_s() <= 0) return 0;
  // Estimated afresh rather than read from the target's fields, so targets captured before a
  // field existed get the same floor.
  const OpCost cost = EstimateOpCost(target);
  double floor = static_cast<double>(cost.min_bytes) / gpu.copy_bandwidth_bytes_per_s();
  const double peak = cost.tensor_cores ? gpu.peak_tensor_flops() : gpu.peak_flops();
  if (cost.min_flops > 0 && peak > 0) {
    floor = std::max(floor, static_cast<double>(cost.min_flops) / peak);
  }
  return floor;
}

}  // namespace kforge
