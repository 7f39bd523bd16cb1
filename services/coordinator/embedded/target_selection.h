// Target selection for `kforge optimize`: the top-K captured targets by expected gain that a
// proposer can work on, and why each one ranked above the last pick was skipped.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"

namespace kforge {

struct SkippedTarget {
  v1::Target target;
  std::string reason;
};

struct TargetSelection {
  std::vector<v1::Target> selected;  // by expected gain, highest first
  std::vector<SkippedTarget> skipped;
};

// Why `target` cannot be searched by this proposer, or "" when it can. The synthesizer needs a
// family; an LLM can try any op.
using TargetRefusal = std::function<std::string(const v1::Target&)>;

// What searching a target can gain the forward pass at most: its share of the forward times
// the part of its eager time above its floor (share x (1 - floor / eager)), as DESIGN.md's
// scheduler weighs targets; its share alone when the floor is unknown (a capture without a
// GPU). An op eager already runs at its floor (a large in-place add) gains nothing.
double ExpectedGain(const v1::Target& target);

// Sets every target's floor on `gpu` (0 where the GPU's bandwidth is unknown), for ExpectedGain.
void SetFloors(v1::OperatorProfile& profile, const v1::GpuInfo& gpu);

// Walks the profile's targets by expected gain (highest first) and takes the first `top_k`
// that run on the GPU, have captured inputs (validation needs them), a measured eager time and
// no refusal.
// Targets passed over on the way are listed with their reason; lower-ranked ones are not.
TargetSelection SelectTargets(const v1::OperatorProfile& profile, int top_k,
                              const TargetRefusal& refusal);

// "f32[64,512] dim=-1": input dtypes and sizes, then the scalar arguments.
std::string TargetSignature(const v1::Target& target);

}  // namespace kforge
