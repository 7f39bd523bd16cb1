// KfArgs::shape_key: which shapes a call has, as one word. The launcher compares it with a
// launch plan's captured call to pick the captured entries (docs/launch-plan.md); kernels
// generated for a captured call may also compare it with a key they bake in (one parameter
// load and compare per warp), where testing every size and stride took some 70 instructions
// and 36 constant loads ahead of the first global load.
#pragma once

#include <cstdint>

#include "common/kforge_device.h"

namespace kforge {

// The inputs' and outputs' counts, and for each tensor its rank, sizes and the strides of its
// dims of more than one element (a dim of one element is read at index 0 whatever its stride),
// mixed by splitmix64 steps. Pointers, dtypes and scalars are not in it: alignment is checked
// apart (the plan's captured.alignment_bytes, or the kernel), and the runtime's guards and the
// kernel's types fix the dtypes.
// Two different shapes share a key with probability 2^-64.
inline uint64_t KfShapeKey(const KfArgs& args) {
  uint64_t key = 0;
  auto mix = [&key](uint64_t word) {
    uint64_t z = (key ^ word) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    key = z ^ (z >> 31);
  };
  auto tensor = [&mix](const KfTensor& t) {
    mix(static_cast<uint64_t>(t.ndim));
    for (int d = 0; d < t.ndim && d < KF_MAX_DIMS; ++d) {
      mix(static_cast<uint64_t>(t.sizes[d]));
      if (t.sizes[d] != 1) mix(static_cast<uint64_t>(t.strides[d]));
    }
  };
  mix(static_cast<uint64_t>(args.num_inputs));
  mix(static_cast<uint64_t>(args.num_outputs));
  for (int i = 0; i < args.num_inputs && i < KF_MAX_INPUTS; ++i) tensor(args.inputs[i]);
  for (int j = 0; j < args.num_outputs && j < KF_MAX_OUTPUTS; ++j) tensor(args.outputs[j]);
  return key;
}

}  // namespace kforge
