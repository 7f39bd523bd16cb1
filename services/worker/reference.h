// ReferenceRunner: runs a target's subgraph through the c10 dispatcher, either at the inputs'
// native dtypes (PyTorch eager, the baseline every candidate must match and beat) or with
// every floating tensor and dtype argument raised to float64 (the reference that errors are
// measured against). Also collects the target's scalar arguments for the kernel ABI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

// Scalar arguments in schema order (kforge_device.h): int, bool and int-list values
// (flattened) in `ints`, float and float-list values in `floats`; None and strings skipped.
// Arguments the target leaves out take the schema's default.
struct ScalarArgs {
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

class ReferenceRunner {
 public:
  enum class Precision { kNative, kFloat64 };
  // What an op that writes an argument (an in-place op, `Tensor(a!) self`) writes into: a copy
  // of that input, so the caller's inputs stay as they were (validation), or the input itself,
  // as the model runs it (eager timing, where a copy would be timed too).
  enum class Writes { kToCopies, kInPlace };

  // Resolves every node's operator and checks that each argument is bound. NOT_FOUND names
  // an operator the dispatcher does not know; INVALID_ARGUMENT an argument that is missing
  // or names an undefined value.
  static absl::StatusOr<ReferenceRunner> Create(const v1::Target& target);

  // Runs the subgraph on `inputs` (target.input_names order) and returns its outputs
  // (target.output_names order). kFloat64 casts floating inputs to float64 and floating
  // dtype arguments to torch.float64, so the result is as exact as float64 allows.
  absl::StatusOr<std::vector<at::Tensor>> Run(const std::vector<at::Tensor>& inputs,
                                              Precision precision,
                                              Writes writes = Writes::kToCopies) const;

  const ScalarArgs& scalar_args() const { return scalar_args_; }

 private:
  struct Node {
    c10::OperatorHandle op;
    // Per schema argument: the input value name, or the constant.
    std::vector<std::string> tensor_names;  // empty name: constant below
    std::vector<c10::IValue> constants;
    std::vector<bool> is_dtype;  // a ScalarType argument (raised to float64 in kFloat64)
    std::vector<bool> written;   // a tensor argument the op writes (its schema's `(a!)`)
    std::vector<std::string> outputs;
  };

  ReferenceRunner() = default;

  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  std::vector<Node> nodes_;
  ScalarArgs scalar_args_;
};

// The dtype enum of the kernel ABI / protos for a torch scalar type (DTYPE_UNSPECIFIED for
// types kforge does not handle) and back.
v1::DType ToProtoDType(at::ScalarType type);
at::ScalarType ToScalarType(v1::DType dtype);

}  // namespace kforge
