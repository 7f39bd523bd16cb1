// Helpers over the proto tensor signature and scalar values that every service prints or
// checks: element sizes, dtype names, contiguity, and the Python-like text of a scalar.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"

namespace kforge {

// Bytes per element; 0 for DTYPE_UNSPECIFIED.
int ElementSize(v1::DType dtype);
// "float32", "bfloat16", ... as torch names them.
std::string DTypeName(v1::DType dtype);
int64_t Numel(const v1::TensorSignature& sig);
// A dense row-major signature of `sizes` on `device`.
v1::TensorSignature DenseSignature(const std::vector<int64_t>& sizes, v1::DType dtype,
                                   const std::string& device = "cuda:0");
// Dense row-major (size-1 dims may have any stride). A signature captured without strides is
// dense by convention.
bool IsContiguous(const v1::TensorSignature& sig);
// A target captured on the CPU, as the CUDA kernels written for it see it: the same
// signature on a CUDA device (the evaluator puts the captured inputs on its GPU).
v1::Target ForCudaKernels(v1::Target target);
// The target input that output `output` of a one-node target is written into: an in-place op
// (`aten::add_.Tensor(Tensor(a!) self, ...) -> Tensor(a!)`) returns the argument its schema
// marks written with the same alias letter. -1 when the output is a tensor of its own.
int AliasedInput(const v1::Target& target, int output);
// "aten::softmax", or "aten::mul -> aten::add -> aten::softmax" for a chain.
std::string TargetOpName(const v1::Target& target);
// ScalarValue constructors, for code that builds targets by hand (tests, benchmarks).
namespace scalar {
v1::ScalarValue Int(int64_t v);
v1::ScalarValue Float(double v);
v1::ScalarValue Bool(bool v);
v1::ScalarValue Str(const std::string& v);
v1::ScalarValue None();
v1::ScalarValue Ints(const std::vector<int64_t>& values);
v1::ScalarValue Floats(const std::vector<double>& values);
}  // namespace scalar

// As Python prints it: 3, 1e-05, True, 'tanh', [1,1], None.
std::string ScalarText(const v1::ScalarValue& value);

}  // namespace kforge
