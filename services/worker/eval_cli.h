// `kforge eval --target DIR_OR_ID --kernel kernel.cu --plan plan.json [--json] [--store URL]`:
// compiles one candidate kernel and validates and times it against a captured target on this
// machine's GPU, the way the worker does, and prints the verdict, diagnostics and timings.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

void RegisterEvalCommands(CLI::App& app);

// A target and its captured inputs (torch.save bytes) as `kforge eval` finds them: a capture's
// targets/<id> directory (target.json + inputs.pt), or an id under ./kforge-out/targets/.
struct LoadedTarget {
  v1::Target target;
  std::string captured_inputs;
  std::string where;  // the directory it came from
};
absl::StatusOr<LoadedTarget> LoadTargetDir(const std::string& dir_or_id);

}  // namespace kforge
