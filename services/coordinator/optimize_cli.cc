// `kforge optimize` (see optimize_cli.h): flags, signals, progress and the final output; the
// job itself is RunOptimize.
#include "services/coordinator/optimize_cli.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "services/coordinator/embedded/optimize_job.h"
#include "common/cli.h"

namespace kforge {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitNoGpu = 3;
constexpr int kExitInterrupted = 130;

struct OptimizeFlags {
  OptimizeOptions options;
  std::string time_budget;
  std::string gpus = "all";
  std::string ops;
  double max_target_mib = 1024;
  bool json = false;
  bool no_export = false;
  OptimizeExportHook export_hook;
};

std::atomic<bool> interrupted{false};

// First Ctrl-C: stop the search cleanly (trees are checkpointed); the second one kills.
void OnSignal(int signal) {
  if (interrupted.exchange(true)) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

void Fail(int code, const std::string& message) {
  std::string line = absl::StrReplaceAll(message, {{"\n", " "}});
  std::fprintf(stderr, "kforge optimize: error: %s\n", line.c_str());
  cli::SetExitCode(code);
}

int ExitCodeFor(const absl::Status& status) {
  if (absl::IsInvalidArgument(status) || absl::IsNotFound(status)) return kExitBadInput;
  if (absl::IsCancelled(status)) return kExitInterrupted;
  return kExitFailed;
}

// "90s", "30m", "1h30m" or a bare number of seconds.
absl::Status ParseTimeBudget(const std::string& text, double* seconds) {
  if (text.empty()) return absl::OkStatus();
  double bare = 0;
  absl::Duration duration;
  if (absl::SimpleAtod(text, &bare)) {
    *seconds = bare;
  } else if (absl::ParseDuration(text, &duration)) {
    *seconds = absl::ToDoubleSeconds(duration);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--time-budget '", text, "' is not a duration: use e.g. 90s, 30m, 1h30m"));
  }
  if (*seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--time-budget must be positive (got '", text, "')"));
  }
  return absl::OkStatus();
}

absl::Status ParseGpus(const std::string& text, std::vector<int>* gpus) {
  gpus->clear();
  if (text == "all" || text.empty()) return absl::OkStatus();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int index = -1;
    if (!absl::SimpleAtoi(part, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus '", text, "': expected 'all' or GPU indices separated by commas, e.g. 0,1"));
    }
    gpus->push_back(index);
  }
  return absl::OkStatus();
}

// "softmax,aten::group_norm" -> {"aten::softmax", "aten::group_norm"}.
absl::Status ParseOps(const std::string& text, std::vector<std::string>* ops) {
  ops->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string op(absl::StripAsciiWhitespace(part));
    if (op.find_first_of(" ()[]") != std::string::npos || absl::EndsWith(op, "::")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ops '", text, "': '", op, "' is not an op name; use e.g. softmax,aten::group_norm"));
    }
    ops->push_back(absl::StrContains(op, "::") ? op : "aten::" + op);
  }
  return absl::OkStatus();
}

void RunOptimizeCommand(OptimizeFlags& flags) {
  OptimizeOptions& options = flags.options;
  if (absl::Status s = ParseOps(flags.ops, &options.ops); !s.ok()) {
    return Fail(kExitBadInput, std::string(s.message()));
  }
  if (options.stop_near_floor != 0 && options.stop_near_floor < 1) {
    return Fail(kExitBadInput, absl::StrCat("--stop-near-floor ", options.stop_near_floor,
                                            ": a factor of at least 1 (1.03: within 3% of the "
                                            "floor), or 0 to spend every iteration"));
  }
  if (flags.max_target_mib <= 0) {
    return Fail(kExitBadInput, "--max-target-mib must be positive");
  }
  options.max_target_input_bytes = static_cast<int64_t>(flags.max_target_mib * 1048576.0);
  if (absl::Status s = ParseTimeBudget(flags.time_budget, &options.time_budget_s); !s.ok()) {
    return Fail(kExitBadInput, std::string(s.message()));
  }
  if (absl::Status s = ParseGpus(flags.gpus, &options.gpus); !s.ok()) {
    return Fail(kExitBadInput, std::string(s.message()));
  }
  if (options.proposer == "openai" || options.proposer == "anthropic") {
    Config config;
    config.LoadEnvironment();  // KFORGE_LLM_MODEL, KFORGE_LLM_BASE_URL, ...
    if (absl::Status s = ApplyLlmConfig(config, options.llm); !s.ok()) {
      return Fail(kExitBadInput, std::string(s.message()));
    }
  }

  ProgressDisplay display(stderr, ::isatty(STDERR_FILENO) == 1);
  options.interrupt = &interrupted;
  interrupted = false;
  auto previous_int = std::signal(SIGINT, OnSignal);
  auto previous_term = std::signal(SIGTERM, OnSignal);
  absl::StatusOr<OptimizeResult> result = RunOptimize(options, &display);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);

  if (!result.ok()) {
    if (absl::IsCancelled(result.status())) {
      std::fprintf(stderr,
                   "kforge optimize: interrupted; the search trees are saved in %s/trees: run "
                   "the same command with --resume to continue\n",
                   options.out_dir.c_str());
      cli::SetExitCode(kExitInterrupted);
      return;
    }
    return Fail(ExitCodeFor(result.status()), std::string(result.status().message()));
  }
  bool has_winner = false;
  for (const TargetReport& t : result->report.targets) has_winner = has_winner || !t.kernel_dir.empty();
  std::string exported;
  if (!result->no_gpu && has_winner && flags.export_hook && !flags.no_export) {
    absl::StatusOr<std::string> e = flags.export_hook(options.out_dir);
    if (!e.ok()) {
      return Fail(kExitFailed,
                  absl::StrCat("the run finished (results in ", options.out_dir,
                               ") but exporting its kernels failed: ", e.status().message(),
                               "; retry with kforge export ", options.out_dir, " --out ",
                               options.out_dir, "/export"));
    }
    exported = *e;
  }
  if (flags.json) {
    std::printf("%s\n", ReportToJson(result->report).dump(2).c_str());
  } else if (!result->no_gpu) {
    std::printf("%s", FormatSummaryText(result->report).c_str());
    std::printf("\nresults in %s (report.json, summary.txt, kernels/); what each search tried: "
                "kforge report %s --search\n",
                options.out_dir.c_str(), options.out_dir.c_str());
  }
  if (!exported.empty()) std::fprintf(flags.json ? stderr : stdout, "\n%s", exported.c_str());
  if (result->no_gpu) {
    std::fprintf(stderr,
                 "kforge: validation and timing need a CUDA GPU; %s. Captured %d targets, "
                 "proposed and compiled %d candidates (%d compiled cleanly); results so far are "
                 "in %s.\n",
                 result->no_gpu_why.c_str(), result->captured_targets, result->proposed,
                 result->compiled_ok, options.out_dir.c_str());
    cli::SetExitCode(kExitNoGpu);
    return;
  }
  cli::SetExitCode(0);
}

}  // namespace

void RegisterOptimizeCommands(CLI::App& app, OptimizeExportHook export_hook) {
  auto flags = std::make_shared<OptimizeFlags>();
  flags->export_hook = std::move(export_hook);
  OptimizeOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "optimize",
      "Capture a TorchScript model, search faster CUDA kernels for its hottest operators on "
      "the local GPU(s), validate them against PyTorch eager and write the winners. "
      "Exit codes: 0 done, 1 failed, 2 bad input, 3 no CUDA GPU (captured and compiled only; "
      "results so far in --out), 130 interrupted (--resume continues).");
  cmd->add_option("model", o.model_path, "TorchScript model (torch.jit.save)")->required();
  cmd->add_option("--inputs", o.inputs_path,
                  "torch.save'd tensor or tuple/list/dict of tensors for forward")
      ->required();
  cmd->add_option("--out", o.out_dir,
                  "run directory: report.json, summary.txt, profile.json, trees/, kernels/, export/ "
                  "(the optimized model, see kforge export)")
      ->required();
  cmd->add_option("--top", o.top_k,
                  "targets to search: those a proposer can work on with the most to gain (share "
                  "of the forward x the part of eager's time above the op's floor)")
      ->capture_default_str();
  cmd->add_option("--ops", flags->ops,
                  "only targets of these ops, e.g. softmax,aten::group_norm (--top applies "
                  "among them)");
  cmd->add_flag("--fuse,!--no-fuse", o.fuse,
                "chains of ops (an elementwise prologue or epilogue around at most one row-wise "
                "or normalization op, each output used only by the next) become targets, their "
                "calls leaving their ops' targets (default on; --no-fuse: single ops only)");
  cmd->add_option("--max-target-mib", flags->max_target_mib,
                  "captured inputs of one target above this many MiB are not kept, and the "
                  "target is not searched (a Redis store holds at most 512 MiB per value)")
      ->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "evaluations per target")->capture_default_str();
  cmd->add_option("--stop-near-floor", o.stop_near_floor,
                  "a target stops once its best kernel is within this factor of its floor (the "
                  "bytes it moves at the GPU's measured copy bandwidth); 0: it spends every "
                  "iteration")
      ->capture_default_str();
  cmd->add_option("--time-budget", flags->time_budget,
                  "wall time of the search, e.g. 30m, 1h30m, 900 (seconds); default none");
  cmd->add_option("--proposer", o.proposer, "synth (built in), openai or anthropic")
      ->capture_default_str();
  cmd->add_option("--gpus", flags->gpus, "GPUs to evaluate on: all, or indices like 0,1")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "search seed (a run is reproducible from it)")
      ->capture_default_str();
  cmd->add_option("--store", o.store_url,
                  "cache and captured inputs: dir:PATH or redis://HOST:PORT[/DB] (default "
                  "dir:<out>/store)");
  cmd->add_flag("--resume", o.resume,
                "continue the run in --out: reuse its capture and search trees");
  cmd->add_option("--device", o.device,
                  "capture device: cuda, cpu or auto (cuda when present); cpu evaluates nothing")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print report.json on stdout instead of the table");
  cmd->add_flag("--no-export", flags->no_export,
                "do not export the winners into <out>/export (kforge export does it later)");
  cmd->callback([flags] { RunOptimizeCommand(*flags); });
}

}  // namespace kforge
