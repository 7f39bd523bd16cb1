// Target selection (see target_selection.h).
#include "services/coordinator/embedded/target_selection.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/op_cost.h"
#include "common/tensor_signature.h"

namespace kforge {
namespace {

std::string DtypeShort(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32:
      return "f32";
    case v1::FLOAT16:
      return "f16";
    case v1::BFLOAT16:
      return "bf16";
    case v1::FLOAT64:
      return "f64";
    case v1::INT64:
      return "i64";
    case v1::INT32:
      return "i32";
    case v1::INT16:
      return "i16";
    case v1::INT8:
      return "i8";
    case v1::UINT8:
      return "u8";
    case v1::BOOL:
      return "b8";
    default:
      return "?";
  }
}


}  // namespace

std::string TargetSignature(const v1::Target& target) {
  std::vector<std::string> parts;
  for (const v1::TensorSignature& input : target.inputs()) {
    parts.push_back(
        absl::StrCat(DtypeShort(input.dtype()), "[", absl::StrJoin(input.sizes(), ","), "]"));
  }
  for (const v1::SubgraphNode& node : target.nodes()) {
    for (const v1::Argument& arg : node.args()) {
      if (arg.has_scalar())
        parts.push_back(absl::StrCat(arg.name(), "=", ScalarText(arg.scalar())));
    }
  }
  return absl::StrJoin(parts, " ");
}

double ExpectedGain(const v1::Target& target) {
  if (target.floor_s() <= 0 || target.eager_time_s() <= 0) return target.share();
  return target.share() * std::max(0.0, 1.0 - target.floor_s() / target.eager_time_s());
}

void SetFloors(v1::OperatorProfile& profile, const v1::GpuInfo& gpu) {
  for (v1::Target& t : *profile.mutable_targets()) t.set_floor_s(FloorSeconds(t, gpu));
}

// Whether every tensor the target reads is a CPU tensor in a GPU capture (a CPU capture's
// targets are described as CUDA tensors before selection): a traced Python number's arithmetic
// or `.item()`, host work that no GPU kernel replaces.
bool HostOnly(const v1::Target& target) {
  if (target.inputs_size() == 0) return false;
  for (const v1::TensorSignature& in : target.inputs()) {
    if (in.device() != "cpu") return false;
  }
  return true;
}

TargetSelection SelectTargets(const v1::OperatorProfile& profile, int top_k,
                              const TargetRefusal& refusal) {
  std::vector<const v1::Target*> ranked;
  for (const v1::Target& t : profile.targets()) ranked.push_back(&t);
  std::stable_sort(ranked.begin(), ranked.end(), [](const v1::Target* a, const v1::Target* b) {
    return ExpectedGain(*a) > ExpectedGain(*b);
  });
  TargetSelection selection;
  for (const v1::Target* t : ranked) {
    if (static_cast<int>(selection.selected.size()) >= top_k) break;
    std::string reason;
    if (HostOnly(*t)) {
      reason = "it runs on the CPU (its tensors are CPU tensors: a traced Python number's "
               "arithmetic or .item()), host work no GPU kernel replaces";
    } else if (t->captured_inputs().sha256().empty()) {
      reason = "its captured inputs were not kept (see the capture notes); validation needs them";
    } else if (t->eager_time_s() <= 0) {
      reason = "no measured eager time";
    } else if (refusal) {
      reason = refusal(*t);
    }
    if (reason.empty()) {
      selection.selected.push_back(*t);
    } else {
      selection.skipped.push_back(SkippedTarget{*t, std::move(reason)});
    }
  }
  return selection;
}

}  // namespace kforge
