// kforge-bench-capture: what recording costs. For each exported model (a folder with
// model.pt and inputs.pt, as tools/kforge-export writes it) prints the plain forward time
// (median), the profiled forward time (recording on, mean) and how much of the latter the
// recorded top-level ops account for.
//   kforge-bench-capture [--device cuda|cpu] [--warmup N] [--iters N] DIR...
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "services/capture/capturer.h"

int main(int argc, char** argv) {
  kforge::CaptureOptions base;
  base.top_k = 0;  // timing only: no input capture
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kforge-bench-capture: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--device") {
      base.device = value();
    } else if (arg == "--warmup") {
      base.warmup = std::atoi(value().c_str());
    } else if (arg == "--iters") {
      base.iters = std::atoi(value().c_str());
    } else if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: kforge-bench-capture [--device cuda|cpu] [--warmup N] [--iters N] DIR...\n");
      return 0;
    } else {
      dirs.push_back(arg);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "kforge-bench-capture: pass folders holding model.pt and inputs.pt\n");
    return 2;
  }
  std::printf("%-16s %-7s %14s %16s %9s %9s %6s\n", "model", "device", "plain ms (med)",
              "profiled ms (mean)", "overhead", "coverage", "groups");
  int failures = 0;
  for (const std::string& dir : dirs) {
    kforge::CaptureOptions options = base;
    options.model_path = (std::filesystem::path(dir) / "model.pt").string();
    options.inputs_path = (std::filesystem::path(dir) / "inputs.pt").string();
    auto result = kforge::Capturer::Run(options, nullptr);
    if (!result.ok()) {
      std::printf("%-16s error: %s\n", dir.c_str(), std::string(result.status().message()).c_str());
      ++failures;
      continue;
    }
    const auto& p = result->profile;
    std::printf("%-16s %-7s %14.3f %16.3f %8.1f%% %8.1f%% %6d\n", p.model_name().c_str(),
                p.device().c_str(), p.forward_time_s() * 1e3, result->profiled_forward_s * 1e3,
                (result->profiled_forward_s / p.forward_time_s() - 1) * 100, p.coverage() * 100,
                p.ops_size());
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}
