// The `occupancy` parameter of the streaming families (elementwise, batch norm): "0" leaves the
// registers to the compiler, which sizes them for the kernel's most demanding path, generic
// fallbacks included; "50" and "100" ask __launch_bounds__ for enough resident blocks that half
// or all of the SM's threads fit (32 registers a thread at 100% on sm_90). More warps keep more
// loads in flight; the paths that need more registers spill, and the captured call's fast path
// is the one that runs.
#pragma once

#include <string>

#include "services/proposer/synth/cost_model.h"
#include "services/proposer/synth/param_space.h"

namespace kforge::synth {

// Registers the compiler gives a streaming kernel left to itself: its generic paths (64-bit
// indices, per-element fallbacks) need about this many whatever its fast path needs (measured
// with `kforge compile`: 32-60 for batch norm, 40-122 for elementwise).
inline constexpr int kUncappedRegisters = 48;

ParamDef OccupancyParam();

// __launch_bounds__'s minimum resident blocks per SM for the config's occupancy and threads;
// 0 for none.
int MinBlocksPerSm(const GpuModel& gpu, const Config& config);

// Empty, or why the config's occupancy is the same kernel as occupancy=0 (a minimum of one
// block asks nothing the block size does not).
std::string CheckOccupancy(const GpuModel& gpu, const Config& config);

// Registers a thread gets: `estimate` for the fast path raised to kUncappedRegisters (what the
// compiler takes for the whole kernel), capped by the minimum's share of the register file.
int OccupancyRegisters(const GpuModel& gpu, int threads, int min_blocks, int estimate);

// How much slower a streaming kernel runs when its fast path needs `needed` registers and the
// cap grants `granted`: the spilled values go through local memory on every vector. Fitted to
// the H200 sweeps of the elementwise family (1.0 a few registers over, 2.4x at 28 over, 4.6x
// at 48): 1 + (excess - 4) / 16.
double SpillFactor(int needed, int granted);

}  // namespace kforge::synth
