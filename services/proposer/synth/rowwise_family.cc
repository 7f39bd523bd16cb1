// RowwiseFamily: softmax, log_softmax, layer_norm and rms_norm over the trailing dim(s) of a
// contiguous tensor, through the row engine; alone or as the anchor of a chain (an
// elementwise prologue and epilogue, PointwiseChain).
#include <cfloat>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/pointwise_chain.h"
#include "services/proposer/synth/row_kernel.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

// An optional per-column tensor (weight, bias) of `cols` elements.
absl::Status ReadAffine(const TargetArgs& args, const char* name, int position, int64_t cols,
                        int* index, v1::DType* dtype) {
  std::optional<int> input = args.InputIndex(name, position);
  if (!input.has_value()) {
    if (!args.IsNone(name, position)) {
      return absl::UnimplementedError(absl::StrCat(args.node().op(), ": ", name,
                                                   " is not a tensor input of the target"));
    }
    return absl::OkStatus();
  }
  const v1::TensorSignature& sig = args.input(*input);
  KF_RETURN_IF_ERROR(RequireDenseFloat(sig, name));
  if (Numel(sig) != cols) {
    return absl::UnimplementedError(absl::StrCat(args.node().op(), ": ", name, " has ",
                                                 Numel(sig), " elements, expected ", cols));
  }
  *index = *input;
  *dtype = sig.dtype();
  return absl::OkStatus();
}

class RowwiseFamily : public Family {
 public:
  std::string Name() const override { return "rowwise"; }
  std::vector<std::string> Ops() const override {
    return {"aten::softmax",     "aten::_softmax",   "aten::log_softmax",
            "aten::_log_softmax", "aten::layer_norm", "aten::rms_norm"};
  }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    // The row op reads the chain's streamed value (input 0) after its prologue.
    const int anchor = ChainAnchor(target);
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::ForChainNode(target, anchor, 0));
    const std::string op = args.OpName();
    RowProblem p;
    if (op == "softmax" || op == "_softmax") {
      p.op = RowOp::kSoftmax;
    } else if (op == "log_softmax" || op == "_log_softmax") {
      p.op = RowOp::kLogSoftmax;
    } else if (op == "layer_norm") {
      p.op = RowOp::kLayerNorm;
    } else if (op == "rms_norm") {
      p.op = RowOp::kRmsNorm;
    } else {
      return absl::UnimplementedError(absl::StrCat("rowwise family does not cover ", op));
    }
    if (args.num_outputs() != 1) {
      return absl::UnimplementedError(absl::StrCat(args.node().op(), " with ",
                                                   args.num_outputs(),
                                                   " outputs; the rowwise family writes one"));
    }
    const bool norm = p.op == RowOp::kLayerNorm || p.op == RowOp::kRmsNorm;
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput(norm ? "input" : "self", 0));
    const v1::TensorSignature& in = args.input(x);
    const v1::TensorSignature& out = args.output(0);
    if (x != 0) {
      return absl::UnimplementedError("the row input must be the target's first input");
    }
    p.in_dtype = in.dtype();
    p.out_dtype = out.dtype();
    p.ndim = in.sizes_size();
    if (p.ndim == 0) return absl::UnimplementedError("0-d input: nothing row-wise to do");
    if (Numel(out) != Numel(in)) {
      return absl::InvalidArgumentError("output and input sizes differ; re-capture the model");
    }
    if (!norm) {
      KF_ASSIGN_OR_RETURN(int64_t dim, args.Int("dim", 1));
      KF_ASSIGN_OR_RETURN(int d, NormalizeDim(dim, p.ndim));
      if (d != p.ndim - 1) {
        return absl::UnimplementedError(absl::StrCat(
            op, " over dim ", dim, " of a ", p.ndim,
            "-d tensor: the rowwise family covers the last dim only"));
      }
      p.row_dims = 1;
    } else {
      KF_ASSIGN_OR_RETURN(std::vector<int64_t> shape, args.IntList("normalized_shape", 1));
      if (shape.empty() || static_cast<int>(shape.size()) > p.ndim) {
        return absl::UnimplementedError(absl::StrCat(op, ": normalized_shape [",
                                                     absl::StrJoin(shape, ","),
                                                     "] does not fit the input"));
      }
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] != in.sizes(p.ndim - shape.size() + i)) {
          return absl::InvalidArgumentError(absl::StrCat(
              op, ": normalized_shape [", absl::StrJoin(shape, ","),
              "] is not the input's trailing sizes; re-capture the model"));
        }
      }
      p.row_dims = static_cast<int>(shape.size());
    }
    KF_RETURN_IF_ERROR(RequireDenseRows(in, p.row_dims, "input"));
    KF_RETURN_IF_ERROR(RequireDenseRows(out, p.row_dims, "output"));
    p.strided_rows = !IsContiguous(in) || !IsContiguous(out);
    p.cols = 1;
    for (int d = p.ndim - p.row_dims; d < p.ndim; ++d) p.cols *= in.sizes(d);
    p.rows = p.cols > 0 ? Numel(in) / p.cols : 0;
    if (p.op == RowOp::kLayerNorm) {
      KF_RETURN_IF_ERROR(ReadAffine(args, "weight", 2, p.cols, &p.weight_input, &p.weight_dtype));
      KF_RETURN_IF_ERROR(ReadAffine(args, "bias", 3, p.cols, &p.bias_input, &p.bias_dtype));
      KF_ASSIGN_OR_RETURN(p.eps, args.Float("eps", 4));
    } else if (p.op == RowOp::kRmsNorm) {
      KF_RETURN_IF_ERROR(ReadAffine(args, "weight", 2, p.cols, &p.weight_input, &p.weight_dtype));
      // eps=None means the epsilon of the accumulate type (fp32 for every covered dtype).
      KF_ASSIGN_OR_RETURN(p.eps, args.FloatOr("eps", 3, FLT_EPSILON));
    }
    // softmax(..., dtype=float32) computes and returns that type (a chain's `to` may follow).
    v1::DType anchor_dtype = in.dtype();
    if (!norm && !args.IsNone("dtype", 2)) {
      KF_ASSIGN_OR_RETURN(anchor_dtype, args.ScalarType("dtype", 2));
    }
    KF_ASSIGN_OR_RETURN(p.chain, PointwiseChain::Bind(target, anchor, p.cols, anchor_dtype));
    p.captured_call = CapturedCallArgs(target);
    return MakeRowKernelGenerator(p, gpu);
  }
};

}  // namespace

std::unique_ptr<Family> MakeRowwiseFamily() { return std::make_unique<RowwiseFamily>(); }

}  // namespace kforge::synth
