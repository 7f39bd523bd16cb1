// GroupNormFamily: group_norm over contiguous (N, C, *) tensors, affine or not, alone or as the
// anchor of a chain (a SiLU after it). A group's C/G channels are one contiguous row, so the
// row engine does the work.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/pointwise_chain.h"
#include "services/proposer/synth/row_kernel.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

class GroupNormFamily : public Family {
 public:
  std::string Name() const override { return "group_norm"; }
  std::vector<std::string> Ops() const override { return {"aten::group_norm"}; }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    const int anchor = ChainAnchor(target);  // a chain's elementwise nodes around it
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::ForChainNode(target, anchor, 0));
    if (args.OpName() != "group_norm") {
      return absl::UnimplementedError(absl::StrCat("group_norm family does not cover ",
                                                   args.node().op()));
    }
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput("input", 0));
    if (x != 0) return absl::UnimplementedError("the input must be the target's first input");
    const v1::TensorSignature& in = args.input(0);
    KF_RETURN_IF_ERROR(RequireDenseFloat(in, "input"));
    KF_RETURN_IF_ERROR(RequireDenseFloat(args.output(0), "output"));
    if (in.sizes_size() < 2) {
      return absl::UnimplementedError("group_norm of a tensor with fewer than 2 dims");
    }
    RowProblem p;
    p.op = RowOp::kGroupNorm;
    p.in_dtype = in.dtype();
    p.out_dtype = args.output(0).dtype();
    p.ndim = in.sizes_size();
    KF_ASSIGN_OR_RETURN(p.groups, args.Int("num_groups", 1));
    const int64_t channels = in.sizes(1);
    p.channels = channels;
    if (p.groups <= 0 || channels % p.groups != 0) {
      return absl::InvalidArgumentError(absl::StrCat("group_norm: ", channels,
                                                     " channels do not split into ", p.groups,
                                                     " groups"));
    }
    for (const char* name : {"weight", "bias"}) {
      const int position = name[0] == 'w' ? 2 : 3;
      std::optional<int> index = args.InputIndex(name, position);
      if (!index.has_value()) {
        if (!args.IsNone(name, position)) {
          return absl::UnimplementedError(absl::StrCat("group_norm: ", name,
                                                       " is not a tensor input"));
        }
        continue;
      }
      KF_RETURN_IF_ERROR(RequireDenseFloat(args.input(*index), name));
      if (Numel(args.input(*index)) != channels) {
        return absl::InvalidArgumentError(absl::StrCat("group_norm: ", name, " has ",
                                                       Numel(args.input(*index)),
                                                       " elements for ", channels, " channels"));
      }
      (position == 2 ? p.weight_input : p.bias_input) = *index;
      (position == 2 ? p.weight_dtype : p.bias_dtype) = args.input(*index).dtype();
    }
    KF_ASSIGN_OR_RETURN(p.eps, args.Float("eps", 4));
    p.rows = in.sizes(0) * p.groups;
    p.cols = p.rows > 0 ? Numel(in) / p.rows : 0;
    KF_ASSIGN_OR_RETURN(p.chain, PointwiseChain::Bind(target, anchor, p.cols, in.dtype()));
    p.captured_call = CapturedCallArgs(target);
    return MakeRowKernelGenerator(p, gpu);
  }
};

}  // namespace

std::unique_ptr<Family> MakeGroupNormFamily() { return std::make_unique<GroupNormFamily>(); }

}  // namespace kforge::synth
