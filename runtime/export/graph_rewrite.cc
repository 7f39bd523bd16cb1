// The TorchScript rewrite of guarded dispatch (see graph_rewrite.h).
#include "runtime/export/graph_rewrite.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor_signature.h"
#include "nlohmann/json.hpp"

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

// One level of InlineAllCalls; whether it inlined anything.
bool InlineCallsOnce(torch::jit::Block* block) {
  bool inlined = false;
  for (auto it = block->nodes().begin(), end = block->nodes().end(); it != end;) {
    Node* node = *it++;  // the iterator moves on before the node is replaced
    torch::jit::GraphFunction* callee = nullptr;
    if (node->kind() == c10::prim::CallMethod) {
      if (auto cls = node->input(0)->type()->cast<c10::ClassType>()) {
        if (torch::jit::Function* method = cls->findMethod(node->s(c10::attr::name))) {
          callee = torch::jit::tryToGraphFunction(*method);
        }
      }
    } else if (node->kind() == c10::prim::CallFunction) {
      if (auto fn = node->input(0)->type()->cast<c10::FunctionType>()) {
        callee = torch::jit::tryToGraphFunction(*fn->function());
        if (callee != nullptr) node->removeInput(0);  // the function constant is no argument
      }
    }
    if (callee != nullptr) {
      torch::jit::inlineCallTo(node, callee, callee->graph().get());
      inlined = true;
      continue;
    }
    for (torch::jit::Block* inner : node->blocks()) inlined = InlineCallsOnce(inner) || inlined;
  }
  return inlined;
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

// Whether the graph's constant is the value the capture recorded for the target. A number the
// capture read from a 0-dim CPU tensor (a traced Python number) matches that tensor constant.
bool ScalarMatches(const v1::ScalarValue& recorded, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.dim() != 0 || !t.device().is_cpu()) return false;
    const c10::ScalarType type = t.scalar_type();
    switch (recorded.value_case()) {
      case v1::ScalarValue::kFloatValue:
        return at::isFloatingType(type) && t.item<double>() == recorded.float_value();
      case v1::ScalarValue::kIntValue:
        return at::isIntegralType(type, /*includeBool=*/false) &&
               t.item<int64_t>() == recorded.int_value();
      case v1::ScalarValue::kBoolValue:
        return type == c10::kBool && t.item<bool>() == recorded.bool_value();
      default:
        return false;
    }
  }
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

// Where a target input is in the graph: input `input` of the subgraph's node `node`.
using InputPosition = std::pair<size_t, size_t>;

// The graph's nodes computing the target — the node computing its outputs (`last`) and, for a
// chain, the nodes before it, each of whose one output only the next uses — and where the
// target's tensor inputs are among their inputs, in target order; FailedPrecondition, naming
// the node and what differs, when `last` does not end such a subgraph. Each node has its target
// node's operator, overload and constant arguments.
struct SubgraphMatch {
  std::vector<Node*> nodes;  // in target order
  std::vector<InputPosition> inputs;
  std::vector<ComputedIntList> computed;  // guarded at run time
};

// The graph's value of a scalar argument as a reader would name it: its constant, else the
// node that computes it.
std::string DescribeScalar(Value* value) {
  if (std::optional<c10::IValue> constant = ConstantOf(value)) {
    std::ostringstream text;
    text << *constant;
    return text.str();
  }
  return absl::StrCat("computed in the graph (by ", value->node()->kind().toQualString(), ")");
}

absl::StatusOr<SubgraphMatch> MatchSubgraph(Node* last, const v1::Target& target) {
  const int k = target.nodes_size();
  if (k == 0) return absl::InvalidArgumentError("the target has no nodes");
  std::map<std::string, int> producer;  // a value inside the subgraph -> its target node
  for (int i = 0; i < k; ++i) {
    for (const std::string& out : target.nodes(i).outputs()) producer[out] = i;
  }
  constexpr InputPosition kUnset{static_cast<size_t>(-1), 0};
  SubgraphMatch match;
  match.nodes.assign(k, nullptr);
  match.inputs.assign(target.input_names_size(), kUnset);
  match.nodes[k - 1] = last;
  for (int i = k - 1; i >= 0; --i) {
    const v1::SubgraphNode& t = target.nodes(i);
    auto differ = [&](auto&&... why) {
      return absl::FailedPreconditionError(absl::StrCat(t.op(), ": ", why...));
    };
    Node* node = match.nodes[i];
    if (node == nullptr) return differ("no node of the graph makes its input from the chain");
    if (node->kind().toQualString() != t.op()) {
      return differ("the graph has ", node->kind().toQualString(), " there");
    }
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (schema == nullptr || schema->overload_name() != t.overload()) {
      return differ("the graph calls overload '", schema ? schema->overload_name() : "?",
                    "', the capture '", t.overload(), "'");
    }
    if (node->inputs().size() != schema->arguments().size()) {
      return differ("the node has ", node->inputs().size(), " inputs for ",
                    schema->arguments().size(), " arguments");
    }
    const size_t outputs = i == k - 1 ? static_cast<size_t>(target.outputs_size()) : 1;
    if (node->outputs().size() != outputs) {
      return differ(node->outputs().size(), " outputs, the target ", outputs);
    }
    for (Value* out : node->outputs()) {
      if (!out->type()->isSubtypeOf(*c10::TensorType::get())) return differ("an output is no tensor");
    }
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
      if (recorded == nullptr || count != 1) {  // unknown or a tensor list
        return differ("the capture recorded no single value of ", name);
      }
      Value* value = node->input(j);
      if (recorded->kind_case() != v1::Argument::kTensor) {
        std::optional<c10::IValue> constant = ConstantOf(value);
        if (constant && ScalarMatches(recorded->scalar(), *constant)) continue;
        // An int list the graph computes — sizes a traced reshape reads from its input — is
        // compared with the captured one on every call instead.
        if (!constant && recorded->scalar().value_case() == v1::ScalarValue::kIntList &&
            value->type()->isSubtypeOf(*c10::ListType::ofInts())) {
          const auto& captured = recorded->scalar().int_list().values();
          match.computed.push_back({static_cast<size_t>(i), j, {captured.begin(), captured.end()}});
          continue;
        }
        return differ(name, " is ", DescribeScalar(value), " there, ",
                      ScalarText(recorded->scalar()), " when captured");
      }
      if (!value->type()->isSubtypeOf(*c10::TensorType::get())) {
        return differ(name, " is no tensor there");
      }
      if (auto inside = producer.find(recorded->tensor()); inside != producer.end()) {
        // A value inside the subgraph: made by the node matched to its producer, used only here.
        const int m = inside->second;
        if (m >= i || value->uses().size() != 1 || value->node()->owningBlock() != node->owningBlock() ||
            (match.nodes[m] != nullptr && match.nodes[m] != value->node())) {
          return differ(name, " is not the chain's value from ", target.nodes(m).op(),
                        " used only here (", value->uses().size(), " uses)");
        }
        match.nodes[m] = value->node();
        continue;
      }
      int index = -1;
      for (int in = 0; in < target.input_names_size(); ++in) {
        if (target.input_names(in) == recorded->tensor()) index = in;
      }
      if (index < 0) return differ(name, " names no input of the target");
      // An input the target reads twice (x in a written-out RMSNorm) is one value here too.
      if (const InputPosition seen = match.inputs[index]; seen != kUnset) {
        if (match.nodes[seen.first]->input(seen.second) != value) {
          return differ(name, " is another value than the chain's earlier read of that input");
        }
        continue;
      }
      // Where the graph records a complete type (traced models), it must agree.
      if (auto type = value->type()->cast<c10::TensorType>()) {
        const v1::TensorSignature& sig = target.inputs(index);
        if (auto sizes = type->sizes().concrete_sizes()) {
          if (!std::equal(sizes->begin(), sizes->end(), sig.sizes().begin(), sig.sizes().end())) {
            return differ(name, " has sizes [", absl::StrJoin(*sizes, ","), "] there, [",
                          absl::StrJoin(sig.sizes(), ","), "] when captured");
          }
        }
        if (auto dtype = type->scalarType(); dtype && *dtype != ScalarTypeOf(sig.dtype())) {
          return differ(name, " is ", c10::toString(*dtype), " there");
        }
      }
      match.inputs[index] = {static_cast<size_t>(i), j};
    }
  }
  for (const InputPosition& position : match.inputs) {
    if (position == kUnset) {
      return absl::FailedPreconditionError("the graph's nodes do not read every target input");
    }
  }
  return match;
}

// What graph.json says the capture saw at each node: the input signatures of the node's first
// call in the capture's discovery forward; nullptr where it recorded none.
using Observed = const nlohmann::json*;

// The capture's graph.json lists forward's graph (inlined as InlineAllCalls does, graph inputs
// first as prim::Param, constants and attribute reads left out) with the observed signatures
// of its aten nodes. Returns them per node of `nodes` when both list the same nodes (kinds and
// value names, in order), else why not.
absl::StatusOr<std::unordered_map<Node*, Observed>> AlignObservations(
    const nlohmann::json& doc, const std::vector<Node*>& nodes) {
  if (!doc.is_object() || doc.value("format", "") != "kforge-graph-v1" ||
      !doc.contains("nodes") || !doc["nodes"].is_array()) {
    return absl::InvalidArgumentError("it is not a kforge-graph-v1 document");
  }
  std::vector<const nlohmann::json*> listed;
  for (const nlohmann::json& n : doc["nodes"]) {
    if (n.is_object() && n.value("kind", "") != "prim::Param") listed.push_back(&n);
  }
  std::vector<Node*> ours;
  for (Node* n : nodes) {
    if (n->kind() != c10::prim::Constant && n->kind() != c10::prim::GetAttr) ours.push_back(n);
  }
  if (listed.size() != ours.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it lists ", listed.size(), " nodes, the model's inlined graph has ", ours.size()));
  }
  std::unordered_map<Node*, Observed> observed;
  for (size_t i = 0; i < ours.size(); ++i) {
    const nlohmann::json& n = *listed[i];
    const std::string kind = ours[i]->kind().toQualString();
    std::vector<std::string> outputs;
    for (const Value* v : ours[i]->outputs()) outputs.push_back(v->debugName());
    std::vector<std::string> listed_outputs;
    for (const nlohmann::json& o : n.value("outputs", nlohmann::json::array())) {
      listed_outputs.push_back(o.is_object() ? o.value("name", "") : "");
    }
    if (n.value("kind", "") != kind || listed_outputs != outputs) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", i, " is ", n.value("kind", "?"), " -> ", absl::StrJoin(listed_outputs, ","),
          " there and ", kind, " -> ", absl::StrJoin(outputs, ","), " in the model"));
    }
    auto it = n.find("observed_inputs");
    observed[ours[i]] = it != n.end() && it->is_array() ? &*it : nullptr;
  }
  return observed;
}

// Whether the capture observed `node` called as target node `i`: its observed tensor inputs, in
// order, are the target node's tensor arguments — a target input's signature, or a value made
// inside the subgraph (not compared).
bool ObservedWith(Observed seen, const v1::Target& target, int i) {
  if (seen == nullptr) return false;
  std::vector<std::string> tensors;
  for (const v1::Argument& a : target.nodes(i).args()) {
    if (a.kind_case() == v1::Argument::kTensor) tensors.push_back(a.tensor());
  }
  if (seen->size() != tensors.size()) return false;
  for (size_t t = 0; t < tensors.size(); ++t) {
    int index = -1;
    for (int in = 0; in < target.input_names_size(); ++in) {
      if (target.input_names(in) == tensors[t]) index = in;
    }
    if (index < 0) continue;
    const nlohmann::json& o = (*seen)[t];
    const v1::TensorSignature& sig = target.inputs(index);
    if (!o.is_object() || o.value("dtype", "") != v1::DType_Name(sig.dtype()) ||
        o.value("sizes", std::vector<int64_t>{}) !=
            std::vector<int64_t>(sig.sizes().begin(), sig.sizes().end()) ||
        o.value("strides", std::vector<int64_t>{}) !=
            std::vector<int64_t>(sig.strides().begin(), sig.strides().end())) {
      return false;
    }
  }
  return true;
}

// Why no node computes `target`, from how far its nodes got.
std::string WhyUnmatched(const v1::Target& target, int with_op, int observed, int with_constants,
                         const std::string& first_difference, bool used_observations) {
  const std::string op = target.nodes(target.nodes_size() - 1).op();
  if (with_op == 0) return absl::StrCat("the model's graph has no ", op, " node");
  const std::string nodes = absl::StrCat(with_op, " ", op, " node", with_op == 1 ? "" : "s");
  if (used_observations && observed == 0) {
    return absl::StrCat("the capture observed none of its ", nodes,
                        " called with the target's input signature");
  }
  const std::string which =
      used_observations
          ? absl::StrCat("its ", op, " nodes the capture observed with the target's inputs (",
                         observed, " of ", with_op, ")")
          : absl::StrCat("its ", nodes);
  if (with_constants == 0) {
    return absl::StrCat(
        which,
        " do not take the target's scalar arguments as constants equal "
        "to the captured values (or, for an int list, computed in the graph), "
        "or differ in overload or tensor types",
        target.nodes_size() > 1 ? absl::StrCat(", or do not end the chain ", TargetOpName(target),
                                               " (each node's one output used only by the next, "
                                               "called as captured)")
                                : "",
        " (the kernel is proven for the captured values only); at the first: ", first_difference);
  }
  return absl::StrCat(which, " go to another target's kernel: a chain that ends there too "
                      "and saves more per call, or a longer chain they are part of");
}

}  // namespace

void InlineAllCalls(torch::jit::Graph& graph) {
  // Each level of calls is one pass; 64 is deeper than any module nesting we have seen.
  for (int pass = 0; pass < 64 && InlineCallsOnce(graph.block()); ++pass) {
  }
}

absl::StatusOr<RewritePlan> PlanRewrite(torch::jit::Module& module,
                                        const std::vector<RewriteKernel>& kernels,
                                        const std::string& graph_json) {
  if (!module.find_method("forward")) {
    return absl::InvalidArgumentError("the model has no forward method to rewrite");
  }
  RewritePlan plan;
  plan.graph = module.get_method("forward").graph();
  // The capture wrote graph.json from a copy of forward's graph, and a copy numbers unnamed
  // values afresh: graph.json is aligned with such a copy, inlined the same way, whose nodes
  // correspond one to one, in order, with the module's own.
  std::shared_ptr<torch::jit::Graph> named = plan.graph->copy();
  try {
    InlineAllCalls(*plan.graph);
    InlineAllCalls(*named);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("inlining the model's forward failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("inlining the model's forward failed: ", e.what()));
  }
  std::vector<Node*> nodes, named_nodes;
  CollectNodes(plan.graph->block(), &nodes);
  CollectNodes(named->block(), &named_nodes);

  std::unordered_map<Node*, Observed> observed;
  nlohmann::json doc;
  if (!graph_json.empty()) {
    doc = nlohmann::json::parse(graph_json, nullptr, false);
    absl::StatusOr<std::unordered_map<Node*, Observed>> aligned =
        AlignObservations(doc, named_nodes);
    bool same = nodes.size() == named_nodes.size();
    for (size_t i = 0; same && i < nodes.size(); ++i) {
      same = nodes[i]->kind() == named_nodes[i]->kind();
    }
    if (aligned.ok() && !same) {
      aligned = absl::InternalError("a copy of forward's graph inlines to other nodes");
    }
    if (aligned.ok()) {
      for (size_t i = 0; i < nodes.size(); ++i) observed[nodes[i]] = (*aligned)[named_nodes[i]];
      plan.used_observations = true;
    } else {
      plan.note = absl::StrCat(
          "the capture's graph.json does not describe this model's graph (",
          aligned.status().message(), "): nodes were matched by operator and constants only, "
          "every such node lists every kernel of its operator and the guards pick at run time");
    }
  }

  struct Tally {
    int with_op = 0, observed = 0, with_constants = 0;
    std::string first_difference;  // why the first node that was not the target is not
  };
  std::map<std::string, Tally> tally;
  for (Node* node : nodes) {
    // The calls that could replace this node: each subgraph ending here that some kernel's
    // target matches, with its kernels (which share the call's inputs) and what one call of
    // the best of them saves.
    std::vector<PlannedNode> calls;
    std::vector<double> saving_s;
    const std::string kind = node->kind().toQualString();
    for (const RewriteKernel& k : kernels) {
      const int last = k.target.nodes_size() - 1;
      if (last < 0 || kind != k.target.nodes(last).op()) continue;
      Tally& t = tally[k.kernel_id];
      ++t.with_op;
      if (plan.used_observations) {
        if (!ObservedWith(observed[node], k.target, last)) continue;
        ++t.observed;
      }
      absl::StatusOr<SubgraphMatch> match = MatchSubgraph(node, k.target);
      if (!match.ok()) {
        if (t.first_difference.empty()) t.first_difference = std::string(match.status().message());
        continue;
      }
      if (plan.used_observations) {
        bool seen = true;
        for (int i = 0; i < last && seen; ++i) {
          seen = ObservedWith(observed[match->nodes[i]], k.target, i);
        }
        if (!seen) continue;
      }
      ++t.with_constants;
      size_t c = 0;
      while (c < calls.size() &&
             (match->nodes != calls[c].nodes || match->inputs != calls[c].input_positions)) {
        ++c;
      }
      if (c == calls.size()) {
        PlannedNode call;
        call.node = node;
        call.nodes = match->nodes;
        call.input_positions = match->inputs;
        for (const auto& [n, j] : call.input_positions) {
          call.inputs.push_back(call.nodes[n]->input(j));
        }
        calls.push_back(std::move(call));
        saving_s.push_back(k.saving_s);
      }
      calls[c].kernel_ids.push_back(k.kernel_id);
      calls[c].computed_lists.push_back(match->computed);
      saving_s[c] = std::max(saving_s[c], k.saving_s);
    }
    if (calls.empty()) continue;
    // Chains of different lengths can end at one node (group_norm -> silu, and the residual's
    // add -> div before them): with eager times additive, the longer call beats the shorter
    // one plus eager's nodes before it exactly when it saves more per call.
    const size_t best = std::max_element(saving_s.begin(), saving_s.end()) - saving_s.begin();
    plan.nodes.push_back(std::move(calls[best]));
  }
  // A node inside a planned chain goes with the chain, not on its own as well.
  std::unordered_map<Node*, bool> in_chain;
  for (const PlannedNode& p : plan.nodes) {
    for (size_t i = 0; i + 1 < p.nodes.size(); ++i) in_chain[p.nodes[i]] = true;
  }
  plan.nodes.erase(std::remove_if(plan.nodes.begin(), plan.nodes.end(),
                                  [&](const PlannedNode& p) { return in_chain.count(p.node) > 0; }),
                   plan.nodes.end());
  for (const PlannedNode& p : plan.nodes) {
    for (const std::string& id : p.kernel_ids) ++plan.nodes_per_kernel[id];
  }
  for (const RewriteKernel& k : kernels) {
    if (plan.nodes_per_kernel.count(k.kernel_id)) continue;
    const Tally& t = tally[k.kernel_id];
    plan.unmatched[k.kernel_id] =
        WhyUnmatched(k.target, t.with_op, t.observed, t.with_constants, t.first_difference,
                     plan.used_observations);
  }
  return plan;
}

namespace {

// kforge::run's `arguments_match`: per kernel of the call, whether each int list the graph
// computes equals the value the kernel was proven for.
Value* ArgumentsMatch(torch::jit::Graph& graph, const PlannedNode& p) {
  std::vector<Value*> flags;
  for (const std::vector<ComputedIntList>& lists : p.computed_lists) {
    Value* all = nullptr;
    for (const ComputedIntList& l : lists) {
      Value* equal = graph.insert(
          c10::aten::eq, {p.nodes[l.node]->input(l.input), graph.insertConstant(l.captured)});
      all = all == nullptr ? equal : graph.insert(c10::aten::__and__, {all, equal});
    }
    flags.push_back(all != nullptr ? all : graph.insertConstant(true));
  }
  return graph.insertNode(graph.createList(c10::BoolType::get(), flags))->output();
}

}  // namespace

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
      // The nodes' current inputs: an earlier rewritten node may have produced them.
      std::vector<Value*> tensors;
      for (const auto& [n, j] : p.input_positions) tensors.push_back(p.nodes[n]->input(j));
      Value* inputs = graph.insertNode(graph.createList(c10::TensorType::get(), tensors))->output();
      std::vector<torch::jit::NamedValue> args = {id, hint, ids, inputs};
      if (std::any_of(p.computed_lists.begin(), p.computed_lists.end(),
                      [](const auto& lists) { return !lists.empty(); })) {
        args.emplace_back(ArgumentsMatch(graph, p));
      }
      Value* outs = graph.insert(run, args);
      Value* count = graph.insert(c10::aten::len, {outs});
      Value* fell_back = graph.insert(c10::aten::eq, {count, graph.insertConstant(0)});
      Node* branch = graph.insertNode(graph.create(c10::prim::If, {fell_back}, 0));
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        branch->addOutput()->setType(c10::TensorType::get());
      }
      torch::jit::Block* fallback = branch->addBlock();
      torch::jit::Block* kernel = branch->addBlock();
      // The fallback: the original nodes, each reading its predecessor's copy.
      std::unordered_map<Value*, Value*> copies;
      Node* original = nullptr;
      for (Node* n : p.nodes) {
        original = graph.createClone(n, [&](Value* v) {
          auto it = copies.find(v);
          return it == copies.end() ? v : it->second;
        });
        fallback->appendNode(original);
        for (size_t i = 0; i < n->outputs().size(); ++i) copies[n->output(i)] = original->output(i);
      }
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
      for (auto n = p.nodes.rbegin(); n != p.nodes.rend(); ++n) (*n)->destroy();
    }
    graph.lint();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("rewriting the TorchScript graph failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("rewriting the TorchScript graph failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace kforge
