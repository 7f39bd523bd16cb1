#include "common/tensor_signature.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kforge {

int ElementSize(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT64:
    case v1::INT64:
      return 8;
    case v1::FLOAT32:
    case v1::INT32:
      return 4;
    case v1::FLOAT16:
    case v1::BFLOAT16:
    case v1::INT16:
      return 2;
    case v1::INT8:
    case v1::UINT8:
    case v1::BOOL:
      return 1;
    default:
      return 0;
  }
}

std::string DTypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "float32";
    case v1::FLOAT16: return "float16";
    case v1::BFLOAT16: return "bfloat16";
    case v1::FLOAT64: return "float64";
    case v1::INT64: return "int64";
    case v1::INT32: return "int32";
    case v1::INT16: return "int16";
    case v1::INT8: return "int8";
    case v1::UINT8: return "uint8";
    case v1::BOOL: return "bool";
    default: return "unspecified";
  }
}

int64_t Numel(const v1::TensorSignature& sig) {
  int64_t n = 1;
  for (int64_t s : sig.sizes()) n *= s;
  return n;
}

bool IsContiguous(const v1::TensorSignature& sig) {
  if (sig.strides_size() == 0) return true;
  if (sig.strides_size() != sig.sizes_size()) return false;
  int64_t expected = 1;
  for (int d = sig.sizes_size() - 1; d >= 0; --d) {
    if (sig.sizes(d) != 1 && sig.strides(d) != expected) return false;
    expected *= sig.sizes(d);
  }
  return true;
}

std::string ScalarText(const v1::ScalarValue& value) {
  switch (value.value_case()) {
    case v1::ScalarValue::kIntValue:
      return absl::StrCat(value.int_value());
    case v1::ScalarValue::kFloatValue:
      return absl::StrFormat("%g", value.float_value());
    case v1::ScalarValue::kBoolValue:
      return value.bool_value() ? "True" : "False";
    case v1::ScalarValue::kStringValue:
      return absl::StrCat("'", value.string_value(), "'");
    case v1::ScalarValue::kIntList:
      return absl::StrCat("[", absl::StrJoin(value.int_list().values(), ","), "]");
    case v1::ScalarValue::kFloatList:
      return absl::StrCat("[", absl::StrJoin(value.float_list().values(), ","), "]");
    default:
      return "None";
  }
}

v1::TensorSignature DenseSignature(const std::vector<int64_t>& sizes, v1::DType dtype,
                                   const std::string& device) {
  v1::TensorSignature sig;
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  for (int64_t s : sizes) sig.add_sizes(s);
  for (int64_t s : strides) sig.add_strides(s);
  sig.set_dtype(dtype);
  sig.set_device(device);
  return sig;
}

std::string TargetOpName(const v1::Target& target) {
  std::vector<std::string> ops;
  for (const v1::SubgraphNode& node : target.nodes()) ops.push_back(node.op());
  return ops.empty() ? "?" : absl::StrJoin(ops, " -> ");
}

int AliasedInput(const v1::Target& target, int output) {
  if (target.nodes_size() != 1) return -1;
  const v1::SubgraphNode& node = target.nodes(0);
  const std::string& schema = node.schema();
  // The returns after "->": "Tensor(a!)" or "(Tensor(a!) values, Tensor indices)".
  const size_t arrow = schema.rfind("->");
  if (arrow == std::string::npos) return -1;
  const std::vector<std::string> returns =
      absl::StrSplit(absl::string_view(schema).substr(arrow + 2), ',');
  if (output < 0 || output >= static_cast<int>(returns.size())) return -1;
  absl::string_view ret = absl::StripAsciiWhitespace(returns[output]);
  absl::ConsumePrefix(&ret, "(");
  const size_t open = ret.find("Tensor(");
  const size_t bang = ret.find("!)");
  if (open != 0 || bang == std::string::npos) return -1;
  const std::string annotation(ret.substr(0, bang + 2));  // "Tensor(a!)"
  // The argument written under the same letter: "Tensor(a!) self".
  const size_t args_open = schema.find('(');
  const size_t at = schema.find(annotation + " ", args_open);
  if (args_open == std::string::npos || at == std::string::npos || at > arrow) return -1;
  const size_t name_begin = at + annotation.size() + 1;
  const size_t name_end = schema.find_first_of(",)=", name_begin);
  const std::string name = schema.substr(name_begin, name_end - name_begin);
  for (const v1::Argument& arg : node.args()) {
    if (arg.name() != name || arg.kind_case() != v1::Argument::kTensor) continue;
    for (int i = 0; i < target.input_names_size(); ++i) {
      if (target.input_names(i) == arg.tensor()) return i;
    }
  }
  return -1;
}

v1::Target ForCudaKernels(v1::Target target) {
  for (auto* signatures : {target.mutable_inputs(), target.mutable_outputs()}) {
    for (v1::TensorSignature& signature : *signatures) {
      if (signature.device().empty() || signature.device() == "cpu") {
        signature.set_device("cuda:0");
      }
    }
  }
  return target;
}

namespace scalar {
v1::ScalarValue Int(int64_t v) {
  v1::ScalarValue s;
  s.set_int_value(v);
  return s;
}
v1::ScalarValue Float(double v) {
  v1::ScalarValue s;
  s.set_float_value(v);
  return s;
}
v1::ScalarValue Bool(bool v) {
  v1::ScalarValue s;
  s.set_bool_value(v);
  return s;
}
v1::ScalarValue Str(const std::string& v) {
  v1::ScalarValue s;
  s.set_string_value(v);
  return s;
}
v1::ScalarValue None() {
  v1::ScalarValue s;
  s.set_none(true);
  return s;
}
v1::ScalarValue Ints(const std::vector<int64_t>& values) {
  v1::ScalarValue s;
  for (int64_t v : values) s.mutable_int_list()->add_values(v);
  return s;
}
v1::ScalarValue Floats(const std::vector<double>& values) {
  v1::ScalarValue s;
  for (double v : values) s.mutable_float_list()->add_values(v);
  return s;
}
}  // namespace scalar

}  // namespace kforge
