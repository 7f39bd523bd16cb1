// Target -> torch_compile_times.py row (see torch_rows.h).
#include "common/torch_rows.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace kforge {

using json = nlohmann::json;

namespace {

json ScalarJson(const v1::ScalarValue& s) {
  switch (s.value_case()) {
    case v1::ScalarValue::kIntValue:
      return s.int_value();
    case v1::ScalarValue::kFloatValue:
      return s.float_value();
    case v1::ScalarValue::kBoolValue:
      return s.bool_value();
    case v1::ScalarValue::kStringValue:
      return s.string_value();
    case v1::ScalarValue::kIntList:
      return std::vector<int64_t>(s.int_list().values().begin(), s.int_list().values().end());
    case v1::ScalarValue::kFloatList:
      return std::vector<double>(s.float_list().values().begin(), s.float_list().values().end());
    default:  // none, or unset: Python's None
      return nullptr;
  }
}

// Target node `n`'s arguments: a target input by index, an earlier node's output by node index,
// or a value.
absl::StatusOr<json> NodeArgs(const v1::Target& target, int n) {
  json args = json::array();
  for (const v1::Argument& arg : target.nodes(n).args()) {
    json a = {{"name", arg.name()}};
    if (arg.kind_case() != v1::Argument::kTensor) {
      a["value"] = ScalarJson(arg.scalar());
      args.push_back(std::move(a));
      continue;
    }
    for (int i = 0; i < target.input_names_size(); ++i) {
      if (target.input_names(i) == arg.tensor()) a["input"] = i;
    }
    for (int m = 0; m < n; ++m) {
      const auto& outs = target.nodes(m).outputs();
      if (std::find(outs.begin(), outs.end(), arg.tensor()) != outs.end()) a["node"] = m;
    }
    if (!a.contains("input") && !a.contains("node")) {
      return absl::InvalidArgumentError(
          absl::StrCat("target ", target.id(), " argument '", arg.name(), "' names value '",
                       arg.tensor(), "', which is neither a target input nor made by an "
                       "earlier node"));
    }
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace

absl::StatusOr<json> TorchRow(const v1::Target& target, const std::string& id,
                              const std::string& label, const std::vector<std::string>& fills) {
  if (target.nodes_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target.id(), " has no nodes"));
  }
  if (static_cast<int>(fills.size()) != target.inputs_size() ||
      target.input_names_size() != target.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target ", target.id(), ": ", target.inputs_size(), " input signatures, ",
                     target.input_names_size(), " input names and ", fills.size(), " fills"));
  }
  json row = {{"id", id}, {"label", label}, {"op", target.nodes(0).op()}};
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
  row["inputs"] = std::move(inputs);
  if (target.nodes_size() == 1) {
    KF_ASSIGN_OR_RETURN(json args, NodeArgs(target, 0));
    row["overload"] = target.nodes(0).overload();
    row["args"] = std::move(args);
  } else {
    json chain = json::array();
    std::vector<std::string> ops;
    for (int n = 0; n < target.nodes_size(); ++n) {
      ops.push_back(target.nodes(n).op());
      if (target.nodes(n).outputs_size() != 1 && n + 1 < target.nodes_size()) {
        return absl::UnimplementedError(absl::StrCat(
            "target ", target.id(), " node ", n, " has ", target.nodes(n).outputs_size(),
            " outputs; a torch row chains nodes of one output"));
      }
      KF_ASSIGN_OR_RETURN(json args, NodeArgs(target, n));
      chain.push_back({{"op", target.nodes(n).op()},
                       {"overload", target.nodes(n).overload()},
                       {"args", std::move(args)}});
    }
    row["op"] = absl::StrJoin(ops, " -> ");
    row["chain"] = std::move(chain);
  }
  row["min_bytes"] = target.min_bytes_moved();
  return row;
}

std::vector<std::string> FillsByArgumentName(const v1::Target& target) {
  std::vector<std::string> fills(static_cast<size_t>(target.inputs_size()), "normal");
  for (const v1::SubgraphNode& node : target.nodes()) {
    for (const v1::Argument& arg : node.args()) {
      if (arg.kind_case() != v1::Argument::kTensor) continue;
      if (arg.name() != "weight" && arg.name() != "bias") continue;
      for (int i = 0; i < target.input_names_size() && i < target.inputs_size(); ++i) {
        if (target.input_names(i) == arg.tensor()) fills[static_cast<size_t>(i)] = arg.name();
      }
    }
  }
  return fills;
}

}  // namespace kforge
