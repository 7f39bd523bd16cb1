// Scalar arithmetic kept on the host (see host_scalars.h).
#include "runtime/export/host_scalars.h"

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>

namespace kforge {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Reads a 0-dim tensor's value on the host.
bool IsScalarRead(const Node* node) {
  static const std::set<c10::Symbol> kinds = {
      c10::aten::Int,         c10::aten::Float,         c10::aten::Bool,
      c10::aten::item,        c10::aten::ScalarImplicit, c10::aten::IntImplicit,
      c10::aten::FloatImplicit};
  return kinds.count(node->kind()) > 0;
}

// Ops whose result is the same whichever device computes it: exact, or correctly rounded.
bool IsExactArithmetic(const Node* node) {
  static const std::set<c10::Symbol> kinds = {
      c10::aten::add, c10::aten::sub,       c10::aten::mul,       c10::aten::div,
      c10::aten::true_divide, c10::aten::floor_divide, c10::aten::remainder, c10::aten::neg};
  return kinds.count(node->kind()) > 0;
}

bool IsTensor(const Value* v) { return v->type()->isSubtypeOf(*c10::TensorType::get()); }

// A 0-dim tensor constant, or nullopt.
std::optional<at::Tensor> ScalarConstant(Value* v) {
  if (v->node()->kind() != c10::prim::Constant || !IsTensor(v)) return std::nullopt;
  std::optional<c10::IValue> value = torch::jit::toIValue(v);
  if (!value || !value->isTensor() || value->toTensor().dim() != 0) return std::nullopt;
  return value->toTensor();
}

}  // namespace

std::vector<Node*> HostScalarArithmetic(torch::jit::Graph& graph) {
  std::vector<Node*> nodes;  // in graph order, nested blocks' nodes after their owner
  std::shared_ptr<torch::jit::Graph> shared = graph.shared_from_this();
  torch::jit::DepthFirstGraphNodeIterator it(shared);
  for (Node* n = it.next(); n != nullptr; n = it.next()) nodes.push_back(n);
  std::set<const Node*> host;  // the qualifying arithmetic nodes
  auto is_host_scalar = [&host](Value* v) {
    return v->node()->kind() == c10::prim::NumToTensor || ScalarConstant(v).has_value() ||
           host.count(v->node()) > 0;
  };
  // Every exact arithmetic node, then drop one whose tensor input is no host scalar or whose
  // result is also used as a tensor, and with it every node it fed, until none changes.
  for (Node* n : nodes) {
    if (IsExactArithmetic(n) && n->outputs().size() == 1) host.insert(n);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (Node* n : nodes) {
      if (!host.count(n)) continue;
      bool keep = true;
      for (const torch::jit::Use& use : n->output()->uses()) {
        if (!IsScalarRead(use.user) && !host.count(use.user)) keep = false;
      }
      for (Value* in : n->inputs()) {
        if (IsTensor(in) && !is_host_scalar(in)) keep = false;
      }
      if (!keep) {
        host.erase(n);
        changed = true;
      }
    }
  }
  std::vector<Node*> found;
  for (Node* n : nodes) {
    if (host.count(n)) found.push_back(n);
  }
  return found;
}

int KeepScalarArithmeticOnHost(torch::jit::Graph& graph, const std::set<const Node*>& leave) {
  int rewritten = 0;
  for (Node* n : HostScalarArithmetic(graph)) {
    if (leave.count(n)) continue;
    std::vector<Value*> inputs(n->inputs().begin(), n->inputs().end());
    if (inputs.size() < 2) continue;
    // The constant as `other`; a commutative op's constant `self` swaps places with it.
    std::optional<at::Tensor> constant = ScalarConstant(inputs[1]);
    std::optional<at::Tensor> self = ScalarConstant(inputs[0]);
    const bool commutative = n->kind() == c10::aten::add || n->kind() == c10::aten::mul;
    if (commutative && !constant && self) {
      std::swap(inputs[0], inputs[1]);
      std::swap(constant, self);
    }
    if (!constant || self) continue;
    // A number of the same kind promotes as the tensor did: an integer, or a float32 (a
    // Python float is the default dtype); a float64 constant would promote to float64, a
    // number not, so it stays.
    c10::IValue number;
    if (c10::isIntegralType(constant->scalar_type(), /*includeBool=*/false)) {
      number = constant->item<int64_t>();
    } else if (constant->scalar_type() == at::kFloat) {
      number = static_cast<double>(constant->item<float>());
    } else {
      continue;
    }
    const c10::FunctionSchema* schema = n->maybeSchema();
    if (schema == nullptr || schema->arguments().size() != inputs.size()) continue;
    torch::jit::WithInsertPoint at(n);
    Node* number_node = graph.insertConstant(number)->node();
    inputs[1] = number_node->output();
    std::vector<torch::jit::NamedValue> args, kwargs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const c10::Argument& declared = schema->arguments()[i];
      if (declared.kwarg_only()) {
        kwargs.emplace_back(declared.name(), inputs[i]);
      } else {
        args.emplace_back(inputs[i]);
      }
    }
    Value* result = nullptr;
    try {
      result = graph.insert(n->kind(), args, kwargs);  // the overload that takes the number
    } catch (const std::exception&) {
      number_node->destroy();  // no such overload: the node stays as the model wrote it
      continue;
    }
    n->output()->replaceAllUsesWith(result);
    n->destroy();
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kforge
