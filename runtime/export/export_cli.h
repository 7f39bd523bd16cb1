// `kforge export RUN_DIR --out OUT`, and the export `kforge optimize` runs at its end.
// Exit codes: 0 exported; 1 failed; 2 bad input (flags, run directory, --out); 3 nothing to
// export (the run validated no kernel that beat eager, e.g. a run without a GPU).
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace kforge {

void RegisterExportCommands(CLI::App& app);

// Exports the finished run in `run_dir` into `run_dir`/export (replacing an earlier export).
// Returns what to print: the summary, or one line saying why nothing was exported when the
// run has nothing to export (no validated winner, or no graph node computes any winner).
absl::StatusOr<std::string> ExportAfterOptimize(const std::string& run_dir);

}  // namespace kforge
