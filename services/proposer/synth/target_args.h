// TargetArgs: what a family reads from a single-node Target — arguments by schema name,
// tensor signatures of its inputs, dtypes and contiguity — with refusals that say why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "common/kforge_device.h"
#include "common/tensor_signature.h"

namespace kforge::synth {

class TargetArgs {
 public:
  // Refuses a target that is not exactly one node (a family that writes chains binds their
  // nodes with ForChainNode).
  static absl::StatusOr<TargetArgs> Create(const v1::Target& target);
  // Node `index` of a chain: its tensor argument that is the previous node's output (the
  // value the chain streams) reads as target input `value_input` (-1: as no input).
  static absl::StatusOr<TargetArgs> ForChainNode(const v1::Target& target, int index,
                                                 int value_input);

  const v1::Target& target() const { return *target_; }
  const v1::SubgraphNode& node() const { return target_->nodes(node_index_); }
  // Whether argument `name` is the value the chain streams into this node: the previous
  // node's output, or for the first node the target's first input.
  bool IsChainedValue(std::string_view name, int position) const;
  // "aten::softmax" -> "softmax".
  std::string OpName() const;

  // The argument named `name` (or, when the capture left names empty, the one at schema
  // position `position`); nullptr when absent.
  const v1::Argument* Find(std::string_view name, int position) const;
  // Whether the argument is absent or an explicit None.
  bool IsNone(std::string_view name, int position) const;

  // Index into target.inputs of a tensor argument; nullopt when absent/None.
  std::optional<int> InputIndex(std::string_view name, int position) const;
  absl::StatusOr<int> RequiredInput(std::string_view name, int position) const;

  absl::StatusOr<int64_t> Int(std::string_view name, int position) const;
  absl::StatusOr<double> Float(std::string_view name, int position) const;
  // Float, or `fallback` where the argument is absent or None (a schema default).
  absl::StatusOr<double> FloatOr(std::string_view name, int position, double fallback) const;
  absl::StatusOr<bool> Bool(std::string_view name, int position) const;
  absl::StatusOr<std::string> String(std::string_view name, int position) const;
  // A ScalarType argument (captured as torch's enum value: 6 float32, 5 float16, 15 bfloat16)
  // as a DType; InvalidArgument for a code without one.
  absl::StatusOr<v1::DType> ScalarType(std::string_view name, int position) const;
  // An int list; a single int is read as a one-element list (int[1] args).
  absl::StatusOr<std::vector<int64_t>> IntList(std::string_view name, int position) const;
  // A float list (scale_factors); a single float is read as a one-element list.
  absl::StatusOr<std::vector<double>> FloatList(std::string_view name, int position) const;

  const v1::TensorSignature& input(int i) const { return target_->inputs(i); }
  const v1::TensorSignature& output(int j) const { return target_->outputs(j); }
  int num_inputs() const { return target_->inputs_size(); }
  int num_outputs() const { return target_->outputs_size(); }

 private:
  TargetArgs(const v1::Target* target, int node_index, int value_input)
      : target_(target), node_index_(node_index), value_input_(value_input) {}
  const v1::Target* target_;
  int node_index_ = 0;
  int value_input_ = -1;
};

// float, float16 and bfloat16: the element types every family covers.
bool IsFloatType(v1::DType dtype);
// CUDA type name: "float", "__half", "__nv_bfloat16", "long long", ...
std::string CudaType(v1::DType dtype);
// Refusal unless `sig` lives on a CUDA device (or names none); `what` names it.
absl::Status RequireCuda(const v1::TensorSignature& sig, std::string_view what);
// Refusal unless `sig` is a contiguous CUDA tensor; `what` names it.
absl::Status RequireDense(const v1::TensorSignature& sig, std::string_view what);
// Refusal unless `sig` is a float/half/bfloat16 CUDA tensor, of any strides; `what` names it.
absl::Status RequireFloat(const v1::TensorSignature& sig, std::string_view what);
// Refusal unless `sig` is a contiguous float/half/bfloat16 CUDA tensor; `what` names it.
absl::Status RequireDenseFloat(const v1::TensorSignature& sig, std::string_view what);
// Whether `sig` is dense in some order of its dims (contiguous, or a permutation of it: eager's
// layout of a transposed input's result), as the kernels walk it (kf_in_memory_order).
bool IsDenseInSomeOrder(const v1::TensorSignature& sig);
// A float CUDA tensor whose trailing `row_dims` dims (a row's elements) are dense and
// innermost, the whole tensor dense in some order: contiguous, or a view such as a transpose
// of the dims before the row's (the row engine reads its rows through their strides).
absl::Status RequireDenseRows(const v1::TensorSignature& sig, int row_dims,
                              std::string_view what);
// The captured sizes and strides of `sig` as the kernel ABI's tensor (no data), for the host
// side of device code (broadcast groups, row spans) in the prior and in generated sources.
KfTensor SignatureTensor(const v1::TensorSignature& sig);
// The target's captured call as the launcher's KfArgs holds it (counts, and each tensor's
// sizes, strides and dtype; no data, no scalars): a captured entry's constants
// (CapturedArgsSource), and its shape key.
KfArgs CapturedCallArgs(const v1::Target& target);
// The shape key (common/shape_key.h) the launcher gives a call with the target's shapes: a
// kernel specialized for the captured call compares it with this.
uint64_t CapturedShapeKey(const v1::Target& target);
// Normalizes a possibly negative dim against `ndim`; OutOfRange when outside.
absl::StatusOr<int> NormalizeDim(int64_t dim, int ndim);

}  // namespace kforge::synth
