// `kforge optimize`: the whole job embedded in this process (see embedded/optimize_job.h).
// Exit codes: 0 done; 1 the run failed; 2 bad input (flags, files, --out); 3 no CUDA GPU —
// captured, proposed and compiled only, results so far in --out; 130 interrupted (--resume
// continues).
#pragma once

#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace kforge {

// Called with the run directory when a run finished with at least one winner; returns the
// lines to print (the export's summary), "" when there was nothing to export. The kforge
// binary passes the exporter (runtime/export), which the coordinator cannot link (LibTorch).
using OptimizeExportHook = std::function<absl::StatusOr<std::string>(const std::string& run_dir)>;

void RegisterOptimizeCommands(CLI::App& app, OptimizeExportHook export_hook = nullptr);

}  // namespace kforge
