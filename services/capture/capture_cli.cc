// `kforge capture` (see capture_cli.h): flags, store, output; every error is one line.
#include "services/capture/capture_cli.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/serve_flags.h"
#include "common/store.h"
#include "services/capture/capture_service.h"
#include "services/capture/capture_report.h"
#include "common/cli.h"

namespace kforge {
namespace {

struct CaptureFlags {
  CaptureOptions options;
  bool json = false;
  std::string out;
  std::string store;
  double max_target_mib = 256;
  int rows = 30;
};

void Fail(const absl::Status& status) {
  std::string message = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  std::fprintf(stderr, "kforge capture: error: %s\n", message.c_str());
  cli::SetExitCode(1);
}

std::string DefaultStoreUrl(const std::string& out) {
  if (!out.empty()) return absl::StrCat("dir:", (std::filesystem::path(out) / "store").string());
  const char* home = std::getenv("HOME");
  std::filesystem::path base = home && *home ? std::filesystem::path(home) / ".cache" / "kforge"
                                             : std::filesystem::path(".kforge-cache");
  return absl::StrCat("dir:", (base / "store").string());
}

void RunCapture(CaptureFlags& flags, const FamilyLookup& family) {
  const std::string url = flags.store.empty() ? DefaultStoreUrl(flags.out) : flags.store;
  auto store = OpenStore(url);
  if (!store.ok()) {
    Fail(absl::Status(store.status().code(),
                      absl::StrCat("cannot open store ", url, ": ", store.status().message())));
    return;
  }
  // Reach the store before the (long) capture, so a bad URL fails at once.
  if (auto probe = (*store)->Get("kforge/probe"); !probe.ok()) {
    Fail(absl::Status(probe.status().code(),
                      absl::StrCat("cannot reach store ", url, ": ", probe.status().message(),
                                   "; check --store or start the store")));
    return;
  }
  flags.options.max_target_input_bytes = static_cast<int64_t>(flags.max_target_mib * 1048576.0);
  auto result = Capturer::Run(flags.options, store->get(), family);
  if (!result.ok()) {
    Fail(result.status());
    return;
  }
  if (!flags.out.empty()) {
    if (auto s = WriteCaptureDir(flags.out, *result); !s.ok()) {
      Fail(s);
      return;
    }
  }
  if (flags.json) {
    auto json = ProfileToJson(result->profile);
    if (!json.ok()) {
      Fail(json.status());
      return;
    }
    std::fwrite(json->data(), 1, json->size(), stdout);
    std::fputc('\n', stdout);
  } else {
    std::string summary = FormatSummary(*result, flags.rows);
    std::fwrite(summary.data(), 1, summary.size(), stdout);
    if (!flags.out.empty())
      std::printf("\nwrote %s (captured inputs in %s)\n", flags.out.c_str(), url.c_str());
  }
}

}  // namespace

void RegisterCaptureCommands(CLI::App& app, FamilyLookup family) {
  auto flags = std::make_shared<CaptureFlags>();
  CLI::App* cmd = app.add_subcommand(
      "capture",
      "Run a TorchScript model, record every top-level aten call and report where the forward "
      "pass spends its time: op table, operator graph, hot targets with their real inputs");
  cmd->add_option("model", flags->options.model_path, "TorchScript model (torch.jit.save)")
      ->required();
  cmd->add_option("--inputs", flags->options.inputs_path,
                  "torch.save'd tensor or tuple/list/dict of tensors for forward")
      ->required();
  cmd->add_option("--device", flags->options.device, "cuda, cpu or auto (cuda when present)")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->options.warmup, "forwards run before timing")
      ->capture_default_str();
  cmd->add_option("--iters", flags->options.iters,
                  "plain forwards timed (median) and profiled forwards averaged")
      ->capture_default_str();
  cmd->add_option("--top", flags->options.top_k, "targets to keep, by time")->capture_default_str();
  cmd->add_option("--name", flags->options.model_name, "model name in the reports");
  cmd->add_flag("--fuse,!--no-fuse", flags->options.fuse,
                "chains of ops (an elementwise prologue or epilogue around at most one row-wise "
                "or normalization op, each output used only by the next) become targets too "
                "(default on; --no-fuse: single ops only)");
  cmd->add_flag("--json", flags->json, "print the OperatorProfile as JSON");
  cmd->add_option("--out", flags->out,
                  "write profile.json, graph.json, summary.txt and targets/<id>/ here");
  cmd->add_option("--store", flags->store,
                  "store for captured inputs: dir:PATH or redis://HOST:PORT[/DB] "
                  "(default dir:<out or ~/.cache/kforge>/store)");
  cmd->add_option("--max-target-mib", flags->max_target_mib,
                  "largest captured input set kept per target, MiB")
      ->capture_default_str();
  cmd->add_option("--rows", flags->rows, "op table rows printed (0: all)")->capture_default_str();
  cmd->callback([flags, family] { RunCapture(*flags, family); });

  auto serve = std::make_shared<ServeFlags>();
  CLI::App* server = cli::ServeCommand(app)->add_subcommand(
      "capture", "Serve CaptureService: models and inputs come as store digests");
  AddServeFlags(server, serve.get(), "0.0.0.0:50051",
                "where models, inputs and captured tensors live: dir:PATH or "
                "redis://HOST:PORT[/DB] (default dir:~/.cache/kforge/store)");
  server->callback([serve, family] {
    absl::StatusOr<ServerOptions> options = ToServerOptions(*serve);
    std::string url = serve->store_url.empty() ? DefaultStoreUrl("") : serve->store_url;
    absl::StatusOr<std::unique_ptr<Store>> store =
        options.ok() ? OpenStore(url) : absl::StatusOr<std::unique_ptr<Store>>(options.status());
    absl::Status status = store.status();
    if (status.ok()) {
      status = RunCaptureServer(*options, store->get(), family);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "kforge serve capture: %s\n", std::string(status.message()).c_str());
      cli::SetExitCode(2);
    }
  });
}

}  // namespace kforge
