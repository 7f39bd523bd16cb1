// `kforge serve coordinator` (JobService + WorkerPool over a store, with health, reflection
// and /metrics) and its clients: `kforge submit MODEL --inputs INPUTS` (uploads, submits,
// prints the job id), `kforge watch JOB` (streams progress), `kforge jobs` (lists). Every
// client takes --coordinator HOST:PORT and --json.
#pragma once

#include "CLI/CLI.hpp"

namespace kforge {

void RegisterCoordinatorCommands(CLI::App& app);

}  // namespace kforge
