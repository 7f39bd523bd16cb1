#include "common/cli.h"

#include <atomic>

namespace kforge::cli {
namespace {
std::atomic<int> exit_code{0};
}  // namespace

void SetExitCode(int code) { exit_code = code; }
int ExitCode() { return exit_code; }

CLI::App* ServeCommand(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return s->get_name() == "serve"; }))
    return sub;
  CLI::App* serve = app.add_subcommand("serve", "Run one kforge service (gRPC, health, reflection)");
  serve->require_subcommand(1);
  return serve;
}

}  // namespace kforge::cli
