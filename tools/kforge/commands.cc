#include "tools/kforge/commands.h"

#include "services/capture/capture_cli.h"
#include "services/coordinator/optimize_cli.h"
#include "services/proposer/proposer_cli.h"
#include "services/worker/compile_cli.h"
#include "services/worker/eval_cli.h"
#include "services/worker/worker_cli.h"

namespace kforge::cli {
namespace {
int exit_code = 0;
}  // namespace

void SetExitCode(int code) { exit_code = code; }
int ExitCode() { return exit_code; }

void RegisterAll(CLI::App& app) {
  (void)app;
  // Each service's Register*Commands(app) call goes here.
  RegisterCaptureCommands(app);
  RegisterCompileCommands(app);
  RegisterEvalCommands(app);
  RegisterWorkerCommands(app);
  RegisterOptimizeCommands(app);
  RegisterProposerCommands(app);
}

}  // namespace kforge::cli
