// `kforge propose --target DIR_OR_ID [--n N] [--seed S] [--json]`: the synthesizer's (or
// another proposer's) proposals for one captured target; and `kforge serve proposer --listen
// ADDR [--metrics ADDR]`: the ProposalService.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

// Adds `propose`, and `proposer` under `serve` (creating `serve` if no other service has).
void RegisterProposerCommands(CLI::App& app);

struct ProposeArgs {
  std::string target;             // a targets/<id>/ dir, a target.json, or a target id
  std::string capture_dir = ".";  // where ids are looked up: <capture_dir>/targets/<id>*/
  int n = 8;
  uint64_t seed = 0;
  bool json = false;
  std::string proposer = "synth";
};

// A target from a capture: DIR/target.json, the file itself, or the unique target whose id
// starts with `dir_or_id` under capture_dir/targets/. Errors say what was looked at.
absl::StatusOr<v1::Target> LoadTarget(const std::string& dir_or_id,
                                      const std::string& capture_dir);

// What `kforge propose` does; returns the exit code (0; 2 bad input; 3 no family covers the
// target, with the refusal on `err`).
int RunPropose(const ProposeArgs& args, std::ostream& out, std::ostream& err);

}  // namespace kforge
