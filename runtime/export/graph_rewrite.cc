// The TorchScript rewrite of guarded dispatch (see graph_rewrite.h).
#include "runtime/export/graph_rewrite.h"

#include <optional>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void CollectNodes(torch::jit::Block* block, std::vector<Node*>* nodes) {
  for (Node* node : block->nodes()) {
    nodes->push_back(node);
    for (torch::jit::Block* inner : node->blocks()) CollectNodes(inner, nodes);
  }
}

// A value's constant: prim::Constant, or a list built from constants (traced graphs build
// int lists such as layer_norm's normalized_shape with prim::ListConstruct).
std::optional<c10::IValue> ConstantOf(Value* value) {
  if (std::optional<c10::IValue> v = torch::jit::toIValue(value)) return v;
  Node* producer = value->node();
  if (producer->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<c10::IValue> items;
  for (Value* input : producer->inputs()) {
    std::optional<c10::IValue> item = torch::jit::toIValue(input);
    if (!item) return std::nullopt;
    items.push_back(*item);
  }
  if (items.empty()) return c10::IValue(c10::List<int64_t>());
  if (items[0].isInt()) {
    c10::List<int64_t> list;
    for (const c10::IValue& i : items) {
      if (!i.isInt()) return std::nullopt;
      list.push_back(i.toInt());
    }
    return c10::IValue(list);
  }
  if (items[0].isDouble()) {
    c10::List<double> list;
    for (const c10::IValue& i : items) {
      if (!i.isDouble()) return std::nullopt;
      list.push_back(i.toDouble());
    }
    return c10::IValue(list);
  }
  if (items[0].isBool()) {
    c10::List<bool> list;
    for (const c10::IValue& i : items) {
      if (!i.isBool()) return std::nullopt;
      list.push_back(i.toBool());
    }
    return c10::IValue(list);
  }
  return std::nullopt;
}

// Whether the graph's constant is the value the capture recorded for the target.
bool ScalarMatches(const v1::ScalarValue& recorded, const c10::IValue& v) {
  switch (recorded.value_case()) {
    case v1::ScalarValue::kNone:
      return v.isNone();
    case v1::ScalarValue::kIntValue:
      return v.isInt() && v.toInt() == recorded.int_value();
    case v1::ScalarValue::kFloatValue:
      return v.isDouble() && v.toDouble() == recorded.float_value();
    case v1::ScalarValue::kBoolValue:
      return v.isBool() && v.toBool() == recorded.bool_value();
    case v1::ScalarValue::kStringValue:
      if (v.isString()) return v.toStringRef() == recorded.string_value();
      if (v.isDevice()) return v.toDevice().str() == recorded.string_value();
      return false;
    case v1::ScalarValue::kIntList: {
      std::vector<int64_t> values;
      if (v.isIntList()) {
        values = v.toIntVector();
      } else if (v.isBoolList()) {
        for (bool b : v.toBoolList()) values.push_back(b ? 1 : 0);
      } else {
        return false;
      }
      return std::equal(values.begin(), values.end(), recorded.int_list().values().begin(),
                        recorded.int_list().values().end());
    }
    case v1::ScalarValue::kFloatList: {
      if (!v.isDoubleList()) return false;
      std::vector<double> values = v.toDoubleVector();
      return std::equal(values.begin(), values.end(), recorded.float_list().values().begin(),
                        recorded.float_list().values().end());
    }
    default:
      return false;
  }
}

c10::ScalarType ScalarTypeOf(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return c10::kFloat;
    case v1::FLOAT16: return c10::kHalf;
    case v1::BFLOAT16: return c10::kBFloat16;
    case v1::FLOAT64: return c10::kDouble;
    case v1::INT64: return c10::kLong;
    case v1::INT32: return c10::kInt;
    case v1::INT16: return c10::kShort;
    case v1::INT8: return c10::kChar;
    case v1::UINT8: return c10::kByte;
    case v1::BOOL: return c10::kBool;
    default: return c10::ScalarType::Undefined;
  }
}

// The node's tensor inputs in target order when it computes the target, else nullopt.
std::optional<std::vector<Value*>> MatchNode(Node* node, const v1::Target& target) {
  const v1::SubgraphNode& t = target.nodes(0);
  if (node->kind().toQualString() != t.op()) return std::nullopt;
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr || schema->overload_name() != t.overload()) return std::nullopt;
  if (node->inputs().size() != schema->arguments().size()) return std::nullopt;
  if (node->outputs().size() != static_cast<size_t>(target.outputs_size())) return std::nullopt;
  for (Value* out : node->outputs()) {
    if (!out->type()->isSubtypeOf(*c10::TensorType::get())) return std::nullopt;
  }
  std::vector<Value*> inputs(target.input_names_size(), nullptr);
  for (size_t j = 0; j < schema->arguments().size(); ++j) {
    const std::string& name = schema->arguments()[j].name();
    const v1::Argument* recorded = nullptr;
    int count = 0;
    for (const v1::Argument& a : t.args()) {
      if (a.name() == name) {
        recorded = recorded ? recorded : &a;
        ++count;
      }
    }
    if (recorded == nullptr || count != 1) return std::nullopt;  // unknown or a tensor list
    Value* value = node->input(j);
    if (recorded->kind_case() == v1::Argument::kTensor) {
      if (!value->type()->isSubtypeOf(*c10::TensorType::get())) return std::nullopt;
      int index = -1;
      for (int k = 0; k < target.input_names_size(); ++k) {
        if (target.input_names(k) == recorded->tensor()) index = k;
      }
      if (index < 0 || inputs[index] != nullptr) return std::nullopt;
      // Where the graph records a complete type (traced models), it must agree.
      if (auto type = value->type()->cast<c10::TensorType>()) {
        const v1::TensorSignature& sig = target.inputs(index);
        if (auto sizes = type->sizes().concrete_sizes()) {
          if (!std::equal(sizes->begin(), sizes->end(), sig.sizes().begin(), sig.sizes().end())) {
            return std::nullopt;
          }
        }
        if (auto dtype = type->scalarType(); dtype && *dtype != ScalarTypeOf(sig.dtype())) {
          return std::nullopt;
        }
      }
      inputs[index] = value;
    } else {
      std::optional<c10::IValue> constant = ConstantOf(value);
      if (!constant || !ScalarMatches(recorded->scalar(), *constant)) return std::nullopt;
    }
  }
  for (Value* v : inputs) {
    if (v == nullptr) return std::nullopt;
  }
  return inputs;
}

}  // namespace

absl::StatusOr<RewritePlan> PlanRewrite(torch::jit::Module& module,
                                        const std::vector<RewriteKernel>& kernels) {
  if (!module.find_method("forward")) {
    return absl::InvalidArgumentError("the model has no forward method to rewrite");
  }
  RewritePlan plan;
  plan.graph = module.get_method("forward").graph();
  torch::jit::Inline(*plan.graph);
  std::vector<Node*> nodes;
  CollectNodes(plan.graph->block(), &nodes);
  for (Node* node : nodes) {
    PlannedNode planned;
    planned.node = node;
    for (const RewriteKernel& k : kernels) {
      if (k.target.nodes_size() != 1) continue;
      std::optional<std::vector<Value*>> inputs = MatchNode(node, k.target);
      if (!inputs) continue;
      // Kernels of one node share the call's input list.
      if (!planned.kernel_ids.empty() && *inputs != planned.inputs) continue;
      planned.inputs = *std::move(inputs);
      planned.kernel_ids.push_back(k.kernel_id);
    }
    if (planned.kernel_ids.empty()) continue;
    for (const std::string& id : planned.kernel_ids) ++plan.nodes_per_kernel[id];
    plan.nodes.push_back(std::move(planned));
  }
  return plan;
}

absl::Status ApplyRewrite(const RewritePlan& plan, const std::string& bundle_id,
                          const std::string& bundle_hint) {
  torch::jit::Graph& graph = *plan.graph;
  const c10::Symbol run = c10::Symbol::fromQualString("kforge::run");
  try {
    for (const PlannedNode& p : plan.nodes) {
      Node* node = p.node;
      torch::jit::WithInsertPoint before(node);
      Value* id = graph.insertConstant(bundle_id);
      Value* hint = graph.insertConstant(bundle_hint);
      std::vector<Value*> kernel_ids;
      for (const std::string& k : p.kernel_ids) kernel_ids.push_back(graph.insertConstant(k));
      Value* ids = graph.insertNode(graph.createList(c10::StringType::get(), kernel_ids))->output();
      Value* inputs = graph.insertNode(graph.createList(c10::TensorType::get(), p.inputs))->output();
      Value* outs = graph.insert(run, {id, hint, ids, inputs});
      Value* count = graph.insert(c10::aten::len, {outs});
      Value* fell_back = graph.insert(c10::aten::eq, {count, graph.insertConstant(0)});
      Node* branch = graph.insertNode(graph.create(c10::prim::If, {fell_back}, 0));
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        branch->addOutput()->setType(c10::TensorType::get());
      }
      torch::jit::Block* fallback = branch->addBlock();
      torch::jit::Block* kernel = branch->addBlock();
      Node* original = graph.createClone(node, [](Value* v) { return v; });
      fallback->appendNode(original);
      for (Value* out : original->outputs()) fallback->registerOutput(out);
      {
        torch::jit::WithInsertPoint in_kernel(kernel);
        for (size_t i = 0; i < node->outputs().size(); ++i) {
          Value* index = graph.insertConstant(static_cast<int64_t>(i));
          kernel->registerOutput(graph.insert(c10::aten::__getitem__, {outs, index}));
        }
      }
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        node->output(i)->replaceAllUsesWith(branch->output(i));
      }
      node->destroy();
    }
    graph.lint();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("rewriting the TorchScript graph failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace kforge
