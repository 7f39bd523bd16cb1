// What every kforge subcommand shares: the process exit code its handler sets, and the
// `kforge serve` group each service adds its `serve NAME` subcommand to.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge::cli {

void SetExitCode(int code);
int ExitCode();

// The `serve` subcommand of `app`, created on first use.
CLI::App* ServeCommand(CLI::App& app);

}  // namespace kforge::cli
