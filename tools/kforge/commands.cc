#include "tools/kforge/commands.h"

namespace kforge::cli {
namespace {
int exit_code = 0;
}  // namespace

void SetExitCode(int code) { exit_code = code; }
int ExitCode() { return exit_code; }

void RegisterAll(CLI::App& app) {
  (void)app;
  // Each service's Register*Commands(app) call goes here.
}

}  // namespace kforge::cli
