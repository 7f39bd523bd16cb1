// Target -> torch_compile_times.py row (see torch_rows.h).
#include "common/torch_rows.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kforge {

using json = nlohmann::json;

absl::StatusOr<json> TorchRow(const v1::Target& target, const std::string& id,
                              const std::string& label, const std::vector<std::string>& fills) {
  if (target.nodes_size() != 1) {
    return absl::UnimplementedError(
        absl::StrCat("target ", target.id(), " has ", target.nodes_size(),
                     " nodes; a torch row calls one aten op, so only single-op targets have one"));
  }
  if (static_cast<int>(fills.size()) != target.inputs_size() ||
      target.input_names_size() != target.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target ", target.id(), ": ", target.inputs_size(), " input signatures, ",
                     target.input_names_size(), " input names and ", fills.size(), " fills"));
  }
  const v1::SubgraphNode& node = target.nodes(0);
  json row = {{"id", id}, {"label", label}, {"op", node.op()}, {"overload", node.overload()}};
  json inputs = json::array();
  for (int i = 0; i < target.inputs_size(); ++i) {
    const v1::TensorSignature& sig = target.inputs(i);
    json input = {{"sizes", std::vector<int64_t>(sig.sizes().begin(), sig.sizes().end())},
                  {"dtype", v1::DType_Name(sig.dtype())},
                  {"fill", fills[i]}};
    if (sig.strides_size() == sig.sizes_size()) {
      input["strides"] = std::vector<int64_t>(sig.strides().begin(), sig.strides().end());
    }
    inputs.push_back(std::move(input));
  }
  json args = json::array();
  for (const v1::Argument& arg : node.args()) {
    json a = {{"name", arg.name()}};
    if (arg.kind_case() == v1::Argument::kTensor) {
      for (int i = 0; i < target.input_names_size(); ++i) {
        if (target.input_names(i) == arg.tensor()) a["input"] = i;
      }
      if (!a.contains("input")) {
        return absl::InvalidArgumentError(
            absl::StrCat("target ", target.id(), " argument '", arg.name(), "' names value '",
                         arg.tensor(), "', which is not one of the target's inputs"));
      }
    } else {
      const v1::ScalarValue& s = arg.scalar();
      switch (s.value_case()) {
        case v1::ScalarValue::kIntValue:
          a["value"] = s.int_value();
          break;
        case v1::ScalarValue::kFloatValue:
          a["value"] = s.float_value();
          break;
        case v1::ScalarValue::kBoolValue:
          a["value"] = s.bool_value();
          break;
        case v1::ScalarValue::kStringValue:
          a["value"] = s.string_value();
          break;
        case v1::ScalarValue::kIntList:
          a["value"] =
              std::vector<int64_t>(s.int_list().values().begin(), s.int_list().values().end());
          break;
        case v1::ScalarValue::kFloatList:
          a["value"] =
              std::vector<double>(s.float_list().values().begin(), s.float_list().values().end());
          break;
        default:  // none, or unset: Python's None
          a["value"] = nullptr;
          break;
      }
    }
    args.push_back(std::move(a));
  }
  row["inputs"] = std::move(inputs);
  row["args"] = std::move(args);
  row["min_bytes"] = target.min_bytes_moved();
  return row;
}

std::vector<std::string> FillsByArgumentName(const v1::Target& target) {
  std::vector<std::string> fills(static_cast<size_t>(target.inputs_size()), "normal");
  if (target.nodes_size() == 0) return fills;
  for (const v1::Argument& arg : target.nodes(0).args()) {
    if (arg.kind_case() != v1::Argument::kTensor) continue;
    if (arg.name() != "weight" && arg.name() != "bias") continue;
    for (int i = 0; i < target.input_names_size() && i < target.inputs_size(); ++i) {
      if (target.input_names(i) == arg.tensor()) fills[static_cast<size_t>(i)] = arg.name();
    }
  }
  return fills;
}

}  // namespace kforge
