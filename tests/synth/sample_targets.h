// Sample targets for the synthesizer tests: one per op form the families cover, built the way
// capture records them (schema argument names, tensor inputs by value name, dense strides),
// in any float dtype and in two shapes (the sample shape and a held-out one of the same rank).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"
#include "services/proposer/synth/family.h"

namespace kforge::synth::testing {

struct SampleTarget {
  std::string name;    // "softmax_last", "mean_middle", ...
  std::string family;  // the family that must cover it
  v1::Target target;
};

// Every sample op form, in `dtype`; shape_variant 0 is the sample shape, 1 a different shape
// of the same rank (and the same op semantics).
std::vector<SampleTarget> SampleTargets(v1::DType dtype, int shape_variant = 0);

// A dense TensorSignature on cuda:0.
v1::TensorSignature Dense(std::vector<int64_t> sizes, v1::DType dtype);
// A TensorSignature of `sizes` with `strides` on cuda:0 (a view: transposed, expanded).
v1::TensorSignature Strided(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                            v1::DType dtype);

// The int_args / float-free scalar flattening of the kernel ABI for `target` (ints, bools and
// int lists in schema order), for LaunchPlan symbol binding.
std::vector<int64_t> IntArgs(const v1::Target& target);

const std::vector<v1::DType>& FloatDTypes();

// Up to `count` distinct valid (canonical, Check-clean) configs of a generator, seeded.
std::vector<Config> ValidSample(const KernelGenerator& generator, int count, uint64_t seed);

// The generator of the family that covers `target` on the default GPU (H200); null with a
// test failure when none does.
std::unique_ptr<KernelGenerator> BindForTest(const v1::Target& target);

}  // namespace kforge::synth::testing
