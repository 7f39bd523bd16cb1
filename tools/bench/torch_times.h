// torch_compile_times.py's output as the sweep's table reads it, and the "vs torch.compile"
// comparison of a row: the worker times a launch-bound winner (under 20 µs) as CUDA-graph
// replays, so its time is set against the script's replays of torch.compile where the script
// has them (it times such rows that way too), else against one launch, and the cell says which.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace kforge::bench {

struct TorchTimes {
  double eager_s = 0;
  std::map<std::string, double> compiled_s;        // mode -> median of one launch
  std::map<std::string, double> graph_compiled_s;  // mode -> median per call of graph replays
  std::string note;
};

// The rows of a torch_compile_times.py --out file by row id; empty for an empty path.
// NotFound / InvalidArgument naming the file and what to run.
absl::StatusOr<std::map<std::string, TorchTimes>> ReadTorchTimes(const std::string& path);

// The faster of torch.compile's modes in `times` (0 when there is none).
double FastestMode(const std::map<std::string, double>& times);

// "1.05×", or "1.05× (graph replays, one input set)" when the winner was timed as CUDA-graph
// replays (`winner_mode` "cuda_graph") and the script replayed torch.compile too: against
// `winner_one_set_graph_s`, the winner's replays on one input set (the sweep's quick pass), as
// the script replays torch.compile's. The worker's own replays rotate up to 64 copies of the
// inputs, every call cold in L2, which for a kernel of a few kilobytes costs some 30% (1.26
// against 0.97 µs, docs/benchmarks/2026-12-04-h200-captured-entry.md): not the script's method.
// "—" without times, or without a one-set time for a graph-timed winner.
std::string VsTorchCompile(const TorchTimes* times, double winner_s,
                           const std::string& winner_mode, double winner_one_set_graph_s);

}  // namespace kforge::bench
