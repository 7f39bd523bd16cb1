// Registration of every subcommand: a service adds its Register*Commands call in commands.cc.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge::cli {

void RegisterAll(CLI::App& app);

}  // namespace kforge::cli
