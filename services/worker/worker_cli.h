// `kforge serve worker --listen ADDR [--metrics ADDR] [--store URL] [--gpus LIST]`: serves
// CompileService and EvaluateService (with health checking and reflection) on a GPU node.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge {

// Adds `worker` under the `serve` subcommand (creating `serve` if no other service has).
void RegisterWorkerCommands(CLI::App& app);

}  // namespace kforge
