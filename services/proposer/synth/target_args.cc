// TargetArgs: argument and signature access for single-node targets and the nodes of chains.
#include "services/proposer/synth/target_args.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "common/shape_key.h"
#include "common/status.h"
#include "services/proposer/synth/device_code.h"

namespace kforge::synth {

absl::StatusOr<TargetArgs> TargetArgs::Create(const v1::Target& target) {
  if (target.nodes_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "target has ", target.nodes_size(), " nodes; this family writes single ops only (an "
        "LLM proposer writes chains)"));
  }
  return ForChainNode(target, 0, -1);
}

absl::StatusOr<TargetArgs> TargetArgs::ForChainNode(const v1::Target& target, int index,
                                                    int value_input) {
  if (index < 0 || index >= target.nodes_size()) {
    return absl::InvalidArgumentError(absl::StrCat("target has no node ", index));
  }
  if (target.outputs_size() < 1) {
    return absl::InvalidArgumentError("target has no outputs; re-capture the model");
  }
  return TargetArgs(&target, index, value_input);
}

bool TargetArgs::IsChainedValue(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kTensor) return false;
  // The first node streams the target's first input.
  if (node_index_ == 0) {
    return target_->input_names_size() > 0 && arg->tensor() == target_->input_names(0);
  }
  const v1::SubgraphNode& previous = target_->nodes(node_index_ - 1);
  return previous.outputs_size() == 1 && arg->tensor() == previous.outputs(0);
}

std::string TargetArgs::OpName() const {
  absl::string_view op = node().op();
  if (absl::StartsWith(op, "aten::")) op.remove_prefix(6);
  return std::string(op);
}

const v1::Argument* TargetArgs::Find(std::string_view name, int position) const {
  const auto& args = node().args();
  for (const v1::Argument& arg : args) {
    if (arg.name() == name) return &arg;
  }
  // Captures that recorded no names keep schema order.
  if (position >= 0 && position < args.size() && args[position].name().empty()) {
    return &args[position];
  }
  return nullptr;
}

bool TargetArgs::IsNone(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr) return true;
  return arg->kind_case() == v1::Argument::kScalar &&
         (arg->scalar().value_case() == v1::ScalarValue::kNone ||
          arg->scalar().value_case() == v1::ScalarValue::VALUE_NOT_SET);
}

std::optional<int> TargetArgs::InputIndex(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kTensor) return std::nullopt;
  if (node_index_ > 0 && IsChainedValue(name, position)) {
    return value_input_ >= 0 ? std::optional<int>(value_input_) : std::nullopt;
  }
  const auto& names = target_->input_names();
  for (int i = 0; i < names.size(); ++i) {
    if (names[i] == arg->tensor()) return i;
  }
  return std::nullopt;
}

absl::StatusOr<int> TargetArgs::RequiredInput(std::string_view name, int position) const {
  std::optional<int> index = InputIndex(name, position);
  if (!index.has_value() || *index >= target_->inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        node().op(), ": tensor argument '", std::string(name),
        "' is missing or not among the target's inputs; re-capture the model"));
  }
  return *index;
}

namespace {
absl::Status Missing(const TargetArgs& args, std::string_view name, std::string_view kind) {
  return absl::InvalidArgumentError(absl::StrCat(args.node().op(), ": argument '",
                                                 std::string(name), "' is missing or not ",
                                                 std::string(kind)));
}
}  // namespace

absl::StatusOr<int64_t> TargetArgs::Int(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar) {
    return Missing(*this, name, "an int");
  }
  const v1::ScalarValue& v = arg->scalar();
  switch (v.value_case()) {
    case v1::ScalarValue::kIntValue: return v.int_value();
    case v1::ScalarValue::kBoolValue: return v.bool_value() ? 1 : 0;
    case v1::ScalarValue::kIntList:
      if (v.int_list().values_size() == 1) return v.int_list().values(0);
      break;
    default: break;
  }
  return Missing(*this, name, "an int");
}

absl::StatusOr<double> TargetArgs::Float(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar) {
    return Missing(*this, name, "a number");
  }
  const v1::ScalarValue& v = arg->scalar();
  switch (v.value_case()) {
    case v1::ScalarValue::kFloatValue: return v.float_value();
    case v1::ScalarValue::kIntValue: return static_cast<double>(v.int_value());
    case v1::ScalarValue::kBoolValue: return v.bool_value() ? 1.0 : 0.0;
    default: break;
  }
  return Missing(*this, name, "a number");
}

absl::StatusOr<double> TargetArgs::FloatOr(std::string_view name, int position,
                                           double fallback) const {
  if (IsNone(name, position)) return fallback;
  return Float(name, position);
}

absl::StatusOr<bool> TargetArgs::Bool(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar) {
    return Missing(*this, name, "a bool");
  }
  const v1::ScalarValue& v = arg->scalar();
  if (v.value_case() == v1::ScalarValue::kBoolValue) return v.bool_value();
  if (v.value_case() == v1::ScalarValue::kIntValue) return v.int_value() != 0;
  return Missing(*this, name, "a bool");
}

absl::StatusOr<std::string> TargetArgs::String(std::string_view name, int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar ||
      arg->scalar().value_case() != v1::ScalarValue::kStringValue) {
    return Missing(*this, name, "a string");
  }
  return arg->scalar().string_value();
}

absl::StatusOr<v1::DType> TargetArgs::ScalarType(std::string_view name, int position) const {
  KF_ASSIGN_OR_RETURN(int64_t code, Int(name, position));
  switch (code) {  // c10::ScalarType's values
    case 0: return v1::UINT8;
    case 1: return v1::INT8;
    case 2: return v1::INT16;
    case 3: return v1::INT32;
    case 4: return v1::INT64;
    case 5: return v1::FLOAT16;
    case 6: return v1::FLOAT32;
    case 7: return v1::FLOAT64;
    case 11: return v1::BOOL;
    case 15: return v1::BFLOAT16;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(node().op(), ": ", std::string(name), "=", code,
                                                 " is no dtype the synthesizer knows"));
}

absl::StatusOr<std::vector<double>> TargetArgs::FloatList(std::string_view name,
                                                         int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar) {
    return Missing(*this, name, "a float list");
  }
  const v1::ScalarValue& v = arg->scalar();
  if (v.value_case() == v1::ScalarValue::kFloatList) {
    return std::vector<double>(v.float_list().values().begin(), v.float_list().values().end());
  }
  if (v.value_case() == v1::ScalarValue::kFloatValue) return std::vector<double>{v.float_value()};
  return Missing(*this, name, "a float list");
}

absl::StatusOr<std::vector<int64_t>> TargetArgs::IntList(std::string_view name,
                                                         int position) const {
  const v1::Argument* arg = Find(name, position);
  if (arg == nullptr || arg->kind_case() != v1::Argument::kScalar) {
    return Missing(*this, name, "an int list");
  }
  const v1::ScalarValue& v = arg->scalar();
  if (v.value_case() == v1::ScalarValue::kIntList) {
    return std::vector<int64_t>(v.int_list().values().begin(), v.int_list().values().end());
  }
  if (v.value_case() == v1::ScalarValue::kIntValue) return std::vector<int64_t>{v.int_value()};
  return Missing(*this, name, "an int list");
}



bool IsFloatType(v1::DType dtype) {
  return dtype == v1::FLOAT32 || dtype == v1::FLOAT16 || dtype == v1::BFLOAT16;
}


std::string CudaType(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "float";
    case v1::FLOAT16: return "__half";
    case v1::BFLOAT16: return "__nv_bfloat16";
    case v1::FLOAT64: return "double";
    case v1::INT64: return "long long";
    case v1::INT32: return "int";
    default: return "unsigned char";
  }
}


absl::Status RequireFloat(const v1::TensorSignature& sig, std::string_view what) {
  if (!IsFloatType(sig.dtype())) {
    return absl::UnimplementedError(absl::StrCat(
        std::string(what), " has dtype ", DTypeName(sig.dtype()),
        "; the synthesizer covers float32, float16 and bfloat16"));
  }
  return RequireCuda(sig, what);
}

absl::Status RequireDenseFloat(const v1::TensorSignature& sig, std::string_view what) {
  KF_RETURN_IF_ERROR(RequireFloat(sig, what));
  return RequireDense(sig, what);
}

absl::Status RequireDense(const v1::TensorSignature& sig, std::string_view what) {
  if (!IsContiguous(sig)) {
    return absl::UnimplementedError(absl::StrCat(
        std::string(what), " is not contiguous (sizes [", absl::StrJoin(sig.sizes(), ","), "], strides [",
        absl::StrJoin(sig.strides(), ","),
        "]); the synthesizer covers contiguous tensors only"));
  }
  return RequireCuda(sig, what);
}

bool IsDenseInSomeOrder(const v1::TensorSignature& sig) {
  const KfTensor t = SignatureTensor(sig);
  const KfTensor ordered = kf_in_memory_order(t, t, t).out;
  return kf_flat(ordered, ordered);
}

absl::Status RequireDenseRows(const v1::TensorSignature& sig, int row_dims,
                              std::string_view what) {
  KF_RETURN_IF_ERROR(RequireFloat(sig, what));
  if (IsContiguous(sig)) return absl::OkStatus();
  // Dense in some order, the row's dims innermost and adjacent in their logical order: the
  // rows are read through the outer dims' strides.
  const int ndim = sig.sizes_size();
  bool dense = sig.strides_size() == ndim && IsDenseInSomeOrder(sig);
  int64_t inner = 1;
  for (int d = ndim - 1; d >= ndim - row_dims && d >= 0 && dense; --d) {
    dense = sig.sizes(d) == 1 || sig.strides(d) == inner;
    inner *= sig.sizes(d);
  }
  if (!dense) {
    return absl::UnimplementedError(absl::StrCat(
        std::string(what), " is not dense with its rows' elements adjacent (sizes [",
        absl::StrJoin(sig.sizes(), ","), "], strides [", absl::StrJoin(sig.strides(), ","),
        "]); the row engine reads contiguous tensors and views whose rows are dense"));
  }
  return absl::OkStatus();
}

absl::Status RequireCuda(const v1::TensorSignature& sig, std::string_view what) {
  if (!sig.device().empty() && !absl::StartsWith(sig.device(), "cuda")) {
    return absl::UnimplementedError(
        absl::StrCat(std::string(what), " lives on ", sig.device(), "; kernels read CUDA tensors only"));
  }
  return absl::OkStatus();
}

KfTensor SignatureTensor(const v1::TensorSignature& sig) {
  KfTensor t{};
  t.ndim = std::min(sig.sizes_size(), KF_MAX_DIMS);
  t.numel = 1;
  // A signature without strides is contiguous (as IsContiguous reads it).
  const bool contiguous = sig.strides_size() == 0;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.sizes[d] = sig.sizes(d);
    if (contiguous) {
      t.strides[d] = t.numel;
    } else {
      t.strides[d] = d < sig.strides_size() ? sig.strides(d) : 0;
    }
    t.numel *= t.sizes[d];
  }
  return t;
}

KfArgs CapturedCallArgs(const v1::Target& target) {
  // As the launcher fills a tensor (MakeKfTensor): sizes past the rank 1, the proto's dtype.
  auto tensor = [](const v1::TensorSignature& sig) {
    KfTensor t = SignatureTensor(sig);
    for (int d = t.ndim; d < KF_MAX_DIMS; ++d) t.sizes[d] = 1;
    t.dtype = static_cast<int>(sig.dtype());
    return t;
  };
  KfArgs args{};
  args.num_inputs = std::min(target.inputs_size(), KF_MAX_INPUTS);
  args.num_outputs = std::min(target.outputs_size(), KF_MAX_OUTPUTS);
  for (int i = 0; i < args.num_inputs; ++i) args.inputs[i] = tensor(target.inputs(i));
  for (int j = 0; j < args.num_outputs; ++j) args.outputs[j] = tensor(target.outputs(j));
  args.shape_key = KfShapeKey(args);
  return args;
}

uint64_t CapturedShapeKey(const v1::Target& target) {
  return CapturedCallArgs(target).shape_key;
}

absl::StatusOr<int> NormalizeDim(int64_t dim, int ndim) {
  const int64_t wrapped = dim < 0 ? dim + std::max(ndim, 1) : dim;
  if (wrapped < 0 || wrapped >= std::max(ndim, 1)) {
    return absl::OutOfRangeError(
        absl::StrCat("dim ", dim, " is out of range for a ", ndim, "-d tensor"));
  }
  return static_cast<int>(wrapped);
}

}  // namespace kforge::synth
