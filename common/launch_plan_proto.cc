// BindSymbols over the protos' TensorSignature: the worker's entry to launch_plan.cc's.
#include "common/launch_plan.h"

namespace kforge {
namespace {

std::vector<TensorShape> Shapes(const std::vector<v1::TensorSignature>& signatures) {
  std::vector<TensorShape> shapes;
  shapes.reserve(signatures.size());
  for (const v1::TensorSignature& s : signatures) {
    shapes.push_back({{s.sizes().begin(), s.sizes().end()}, {s.strides().begin(), s.strides().end()}});
  }
  return shapes;
}

}  // namespace

SymbolTable BindSymbols(const std::vector<v1::TensorSignature>& inputs,
                        const std::vector<v1::TensorSignature>& outputs,
                        const std::vector<int64_t>& int_args, int num_sms) {
  return BindShapeSymbols(Shapes(inputs), Shapes(outputs), int_args, num_sms);
}

}  // namespace kforge
