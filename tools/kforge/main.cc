// kforge: the command-line entry point. Each service library registers its own subcommands;
// this file only wires them together and turns errors into one clear line and exit code.
#include <cstdio>
#include <exception>

#include "CLI/CLI.hpp"
#include "common/cli.h"
#include "tools/kforge/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kforge: finds the operators that dominate a PyTorch model's GPU time and writes "
               "faster CUDA kernels for them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kforge 0.1.0");
  kforge::cli::RegisterAll(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge: error: %s\n", e.what());
    return 1;
  }
  return kforge::cli::ExitCode();
}
