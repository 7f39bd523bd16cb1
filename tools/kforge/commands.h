// Registration of every subcommand. A service adds its Register*Commands here and in
// commands.cc; handlers set the process exit code through SetExitCode.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge::cli {

void RegisterAll(CLI::App& app);
void SetExitCode(int code);
int ExitCode();

}  // namespace kforge::cli
