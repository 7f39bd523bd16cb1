// `kforge capture`: profiles a TorchScript model and writes its op table, operator graph and
// targets (see Capturer).
#pragma once

#include "CLI/CLI.hpp"
#include "services/capture/capturer.h"

namespace kforge {

// Adds the `capture` subcommand. `family` names the synthesizer family of each target
// (empty: every target reports family "none").
void RegisterCaptureCommands(CLI::App& app, FamilyLookup family = nullptr);

}  // namespace kforge
