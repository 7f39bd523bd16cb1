// When kforge times a kernel as CUDA-graph replays instead of one launch at a time: a kernel of
// a few microseconds is mostly launch overhead and its noise, while a captured model replays
// it from a graph. The worker's rule (evaluator_cuda_backend.cc), which the benchmarks follow.
#pragma once

namespace kforge {

inline constexpr double kLaunchBoundSeconds = 20e-6;  // a median under this: time replays
inline constexpr int kGraphLaunches = 20;             // launches captured per graph

}  // namespace kforge
