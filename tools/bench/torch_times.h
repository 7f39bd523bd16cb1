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

// "1.05×", or "1.05× (graph replays)" when the winner was timed as CUDA-graph replays
// (`winner_mode` "cuda_graph") and the script replayed torch.compile too; "—" without times.
std::string VsTorchCompile(const TorchTimes* times, double winner_s,
                           const std::string& winner_mode);

}  // namespace kforge::bench
