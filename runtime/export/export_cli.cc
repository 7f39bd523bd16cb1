// `kforge export` (see export_cli.h).
#include "runtime/export/export_cli.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/cli.h"
#include "runtime/export/exporter.h"

namespace kforge {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitNothing = 3;

struct ExportFlags {
  ExportOptions options;
  bool json = false;
};

void RunExportCommand(const ExportFlags& flags) {
  absl::StatusOr<ExportResult> result = ExportBundle(flags.options);
  if (!result.ok()) {
    const absl::Status& s = result.status();
    std::string line = absl::StrReplaceAll(s.message(), {{"\n", " "}});
    std::fprintf(stderr, "kforge export: error: %s\n", line.c_str());
    cli::SetExitCode(absl::IsFailedPrecondition(s)                            ? kExitNothing
                     : absl::IsInvalidArgument(s) || absl::IsNotFound(s) ? kExitBadInput
                                                                           : kExitFailed);
    return;
  }
  if (flags.json) {
    std::printf("%s\n", ExportResultToJson(*result).dump(2).c_str());
  } else {
    std::printf("%s", FormatExportSummary(*result).c_str());
  }
  cli::SetExitCode(0);
}

}  // namespace

void RegisterExportCommands(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write the optimized model of a finished `kforge optimize` run: the TorchScript model "
      "rewritten for guarded dispatch, the kernels' cubins and PTX, a manifest with their "
      "guards and checksums, and a README. Exit codes: 0 exported, 1 failed, 2 bad input, "
      "3 nothing to export.");
  cmd->add_option("run", flags->options.run_dir, "the --out directory of kforge optimize")
      ->required();
  cmd->add_option("--out", flags->options.out_dir, "bundle directory to write")->required();
  cmd->add_option("--arch", flags->options.archs,
                  "GPU architectures to compile cubins for, e.g. --arch sm_90 --arch sm_100 "
                  "(default: the arch each kernel was validated on)");
  cmd->add_option("--model", flags->options.model_path,
                  "the run's original TorchScript model, if it moved (its sha256 must match)");
  cmd->add_flag("--force", flags->options.force, "replace a bundle already in --out");
  cmd->add_flag("--json", flags->json, "print the export's result as JSON");
  cmd->callback([flags] { RunExportCommand(*flags); });
}

absl::StatusOr<std::string> ExportAfterOptimize(const std::string& run_dir) {
  ExportOptions options;
  options.run_dir = run_dir;
  options.out_dir = (std::filesystem::path(run_dir) / "export").string();
  options.force = true;
  absl::StatusOr<ExportResult> result = ExportBundle(options);
  if (absl::IsFailedPrecondition(result.status())) {
    // Not an error of the run, but never silent: the user expects RUN/export.
    return absl::StrCat("nothing exported to ", options.out_dir, ": ",
                        absl::StrReplaceAll(result.status().message(), {{"\n", " "}}), "\n");
  }
  if (!result.ok()) return result.status();
  return FormatExportSummary(*result);
}

}  // namespace kforge
