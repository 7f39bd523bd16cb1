// The least work a target must do — bytes it must move and arithmetic it must perform — from
// its subgraph and signatures. Both feed the speed-of-light floor the worker reports beside
// every time: max(bytes / measured copy bandwidth, FLOPs / measured peak).
//
// FLOP counts are lower bounds by op class: 2·M·N·K for GEMMs, 2·outputs·(reduction size) for
// convolutions, a small per-element count for normalizations, activations and reductions
// (a transcendental counts as a few FLOPs). Ops it does not know count 0 FLOPs, so their
// floor is the byte floor alone — never an invented number.
#pragma once

#include <cstdint>

#include "kforge/v1/common.pb.h"

namespace kforge {

struct OpCost {
  int64_t min_bytes = 0;   // every input and output once
  int64_t min_flops = 0;
  bool tensor_cores = false;  // GEMM-like work that tensor cores can do
};

OpCost EstimateOpCost(const v1::Target& target);

// Sets min_bytes_moved, min_flops and tensor_core_op on `target`.
void SetOpCost(v1::Target& target);

// The floor in seconds on a GPU; 0 when the GPU's bandwidth is unknown.
double FloorSeconds(const v1::Target& target, const v1::GpuInfo& gpu);

}  // namespace kforge
