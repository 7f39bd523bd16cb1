// `kforge compile kernel.cu [--plan plan.json] [--arch sm_90] [--json] [--store URL]`:
// compiles one candidate kernel the way the worker does and prints the verdict, log and
// per-kernel resources.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge {

void RegisterCompileCommands(CLI::App& app);

}  // namespace kforge
