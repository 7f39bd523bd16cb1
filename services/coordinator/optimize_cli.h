// `kforge optimize`: the whole job embedded in this process (see embedded/optimize_job.h).
// Exit codes: 0 done; 1 the run failed; 2 bad input (flags, files, --out); 3 no CUDA GPU —
// captured, proposed and compiled only, results so far in --out; 130 interrupted (--resume
// continues).
#pragma once

#include "CLI/CLI.hpp"

namespace kforge {

void RegisterOptimizeCommands(CLI::App& app);

}  // namespace kforge
