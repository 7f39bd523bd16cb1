// ReferenceRunner: a target's subgraph through the c10 dispatcher, at native precision or
// raised to float64.
#include "services/worker/reference.h"

#include <exception>
#include <map>
#include <optional>
#include <utility>

#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <ATen/core/stack.h>
#include <ATen/ops/scalar_tensor.h>

#include "absl/strings/str_cat.h"
#include "c10/util/Exception.h"

namespace kforge {
namespace {

c10::TypePtr Unwrapped(const c10::Argument& arg) {
  c10::TypePtr type = arg.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type;
}

bool IsTensorType(const c10::TypePtr& type) { return type->kind() == c10::TypeKind::TensorType; }

absl::StatusOr<c10::IValue> HostScalarTensor(const v1::ScalarValue& value,
                                             const std::string& where) {
  switch (value.value_case()) {
    case v1::ScalarValue::kFloatValue:
      return c10::IValue(at::scalar_tensor(value.float_value(), at::kDouble));
    case v1::ScalarValue::kIntValue:
      return c10::IValue(at::scalar_tensor(value.int_value(), at::kLong));
    case v1::ScalarValue::kBoolValue:
      return c10::IValue(at::scalar_tensor(value.bool_value(), at::kBool));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is a tensor but the target gives a constant that is no number"));
  }
}

absl::StatusOr<c10::IValue> ToIValue(const v1::ScalarValue& value, const c10::TypePtr& type,
                                     const std::string& where) {
  c10::TypeKind kind = type->kind();
  switch (value.value_case()) {
    case v1::ScalarValue::kNone:
      return c10::IValue();
    case v1::ScalarValue::kIntValue:
      if (kind == c10::TypeKind::FloatType) {
        return c10::IValue(static_cast<double>(value.int_value()));
      }
      if (kind == c10::TypeKind::BoolType) return c10::IValue(value.int_value() != 0);
      return c10::IValue(value.int_value());
    case v1::ScalarValue::kFloatValue:
      return c10::IValue(value.float_value());
    case v1::ScalarValue::kBoolValue:
      if (kind == c10::TypeKind::IntType) {
        return c10::IValue(static_cast<int64_t>(value.bool_value()));
      }
      return c10::IValue(value.bool_value());
    case v1::ScalarValue::kStringValue:
      return c10::IValue(value.string_value());
    case v1::ScalarValue::kIntList: {
      c10::TypePtr element;
      if (auto list = type->cast<c10::ListType>()) element = list->getElementType();
      if (element && element->kind() == c10::TypeKind::BoolType) {
        c10::List<bool> out;
        for (int64_t v : value.int_list().values()) out.push_back(v != 0);
        return c10::IValue(out);
      }
      if (element && element->kind() == c10::TypeKind::FloatType) {
        c10::List<double> out;
        for (int64_t v : value.int_list().values()) out.push_back(static_cast<double>(v));
        return c10::IValue(out);
      }
      c10::List<int64_t> out;
      for (int64_t v : value.int_list().values()) out.push_back(v);
      return c10::IValue(out);
    }
    case v1::ScalarValue::kFloatList: {
      c10::List<double> out;
      for (double v : value.float_list().values()) out.push_back(v);
      return c10::IValue(out);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the scalar argument has no value; re-capture the target"));
  }
}

void AppendScalar(const c10::IValue& value, ScalarArgs& args) {
  if (value.isBool()) {
    args.ints.push_back(value.toBool() ? 1 : 0);
  } else if (value.isInt()) {
    args.ints.push_back(value.toInt());
  } else if (value.isDouble()) {
    args.floats.push_back(value.toDouble());
  } else if (value.isIntList()) {
    for (int64_t v : value.toIntVector()) args.ints.push_back(v);
  } else if (value.isBoolList()) {
    for (bool v : value.toBoolList()) args.ints.push_back(v ? 1 : 0);
  } else if (value.isDoubleList()) {
    for (double v : value.toDoubleVector()) args.floats.push_back(v);
  }
  // None, strings, devices and tensors are not scalar ABI arguments.
}

}  // namespace

v1::DType ToProtoDType(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return v1::FLOAT32;
    case at::kHalf: return v1::FLOAT16;
    case at::kBFloat16: return v1::BFLOAT16;
    case at::kDouble: return v1::FLOAT64;
    case at::kLong: return v1::INT64;
    case at::kInt: return v1::INT32;
    case at::kShort: return v1::INT16;
    case at::kChar: return v1::INT8;
    case at::kByte: return v1::UINT8;
    case at::kBool: return v1::BOOL;
    default: return v1::DTYPE_UNSPECIFIED;
  }
}

at::ScalarType ToScalarType(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return at::kFloat;
    case v1::FLOAT16: return at::kHalf;
    case v1::BFLOAT16: return at::kBFloat16;
    case v1::FLOAT64: return at::kDouble;
    case v1::INT64: return at::kLong;
    case v1::INT32: return at::kInt;
    case v1::INT16: return at::kShort;
    case v1::INT8: return at::kChar;
    case v1::UINT8: return at::kByte;
    case v1::BOOL: return at::kBool;
    default: return at::ScalarType::Undefined;
  }
}

absl::StatusOr<ReferenceRunner> ReferenceRunner::Create(const v1::Target& target) {
  if (target.nodes().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target ", target.id(), " has no nodes; re-capture it"));
  }
  ReferenceRunner runner;
  runner.input_names_.assign(target.input_names().begin(), target.input_names().end());
  runner.output_names_.assign(target.output_names().begin(), target.output_names().end());
  std::map<std::string, bool> defined;
  for (const std::string& name : runner.input_names_) defined[name] = true;

  for (int n = 0; n < target.nodes_size(); ++n) {
    const v1::SubgraphNode& node = target.nodes(n);
    std::string label = node.overload().empty() ? node.op()
                                                : absl::StrCat(node.op(), ".", node.overload());
    std::string where = absl::StrCat("target ", target.id(), " node ", n, " (", label, ")");
    std::optional<c10::OperatorHandle> op =
        c10::Dispatcher::singleton().findSchema({node.op(), node.overload()});
    if (!op.has_value()) {
      return absl::NotFoundError(absl::StrCat(
          where, ": the dispatcher knows no such operator; check the op and overload names"));
    }
    Node resolved{*op, {}, {}, {}, {}, {node.outputs().begin(), node.outputs().end()}};
    std::map<std::string, const v1::Argument*> by_name;
    for (const v1::Argument& arg : node.args()) by_name[arg.name()] = &arg;
    const c10::FunctionSchema& schema = op->schema();
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const c10::Argument& formal = schema.arguments()[i];
      c10::TypePtr type = Unwrapped(formal);
      std::string arg_where = absl::StrCat(where, " argument '", formal.name(), "'");
      auto it = by_name.find(formal.name());
      std::string tensor_name;
      c10::IValue constant;
      if (it != by_name.end() && it->second->kind_case() == v1::Argument::kTensor) {
        tensor_name = it->second->tensor();
        if (!defined.count(tensor_name)) {
          return absl::InvalidArgumentError(absl::StrCat(
              arg_where, " names value '", tensor_name, "', which no input or earlier node defines"));
        }
      } else if (it != by_name.end()) {
        if (IsTensorType(type) && !it->second->scalar().has_none()) {
          // A host scalar the capture recorded by value (a traced Python number): the 0-dim
          // CPU tensor the trace holds, f64 for a float, i64 for an int. Kernels get the
          // number among the scalar arguments.
          absl::StatusOr<c10::IValue> value = HostScalarTensor(it->second->scalar(), arg_where);
          if (!value.ok()) return value.status();
          AppendScalar(value->toTensor().item(), runner.scalar_args_);
          constant = *std::move(value);
        } else {
          absl::StatusOr<c10::IValue> value = ToIValue(it->second->scalar(), type, arg_where);
          if (!value.ok()) return value.status();
          constant = *std::move(value);
        }
      } else if (formal.default_value().has_value()) {
        constant = *formal.default_value();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(arg_where, " is required and the target does not bind it"));
      }
      if (tensor_name.empty()) AppendScalar(constant, runner.scalar_args_);
      resolved.tensor_names.push_back(tensor_name);
      resolved.constants.push_back(std::move(constant));
      resolved.is_dtype.push_back(type->kind() == c10::TypeKind::ScalarTypeType);
      resolved.written.push_back(formal.alias_info() != nullptr && formal.alias_info()->isWrite());
    }
    for (const std::string& out : resolved.outputs) defined[out] = true;
    runner.nodes_.push_back(std::move(resolved));
  }
  for (const std::string& name : runner.output_names_) {
    if (!defined.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target ", target.id(), " output '", name, "' is not defined by any node"));
    }
  }
  return runner;
}

absl::StatusOr<std::vector<at::Tensor>> ReferenceRunner::Run(
    const std::vector<at::Tensor>& inputs, Precision precision, Writes writes) const {
  if (inputs.size() != input_names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("reference: the target has ",
                                                   input_names_.size(), " inputs, got ",
                                                   inputs.size(), " tensors"));
  }
  const bool raise = precision == Precision::kFloat64;
  std::map<std::string, c10::IValue> values;
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor t = inputs[i];
      if (raise && t.defined() && at::isFloatingType(t.scalar_type())) t = t.to(at::kDouble);
      values[input_names_[i]] = c10::IValue(t);
    }
    for (const Node& node : nodes_) {
      torch::jit::Stack stack;
      stack.reserve(node.constants.size());
      for (size_t a = 0; a < node.constants.size(); ++a) {
        if (!node.tensor_names[a].empty()) {
          const c10::IValue& value = values.at(node.tensor_names[a]);
          const bool copy = writes == Writes::kToCopies && node.written[a] && value.isTensor();
          stack.push_back(copy ? c10::IValue(value.toTensor().clone()) : value);
          continue;
        }
        c10::IValue constant = node.constants[a];
        if (raise && node.is_dtype[a] && constant.isInt() &&
            at::isFloatingType(static_cast<at::ScalarType>(constant.toInt()))) {
          constant = c10::IValue(static_cast<int64_t>(at::kDouble));
        }
        stack.push_back(std::move(constant));
      }
      node.op.callBoxed(&stack);
      for (size_t o = 0; o < node.outputs.size() && o < stack.size(); ++o) {
        values[node.outputs[o]] = stack[o];
      }
    }
    std::vector<at::Tensor> outputs;
    for (const std::string& name : output_names_) {
      const c10::IValue& value = values.at(name);
      if (!value.isTensor()) {
        return absl::InvalidArgumentError(
            absl::StrCat("reference: output '", name, "' is not a tensor (", value.tagKind(),
                         "); only tensor outputs can be validated"));
      }
      outputs.push_back(value.toTensor());
    }
    return outputs;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reference: PyTorch refused the target's inputs: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference: PyTorch refused the target's inputs: ", e.what()));
  }
}

}  // namespace kforge
