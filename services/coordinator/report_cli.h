// `kforge report RUN`: what an optimize run directory holds, for scripts. Prints the run's
// summary (or report.json with --json, or with --search every candidate each target's search
// tried, its verdict and time, and the fastest per parameter value); --torch-rows writes the
// selected targets as torch_compile_times.py rows (common/torch_rows.h), with --torch-inputs
// their captured inputs as torch.save files beside them, so torch.compile is timed per target
// on the inputs kforge validated against. Exit codes: 0 done, 1 failed, 2 bad input.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge {

void RegisterReportCommands(CLI::App& app);

}  // namespace kforge
