// The `kforge serve worker` subcommand (see worker_cli.h).
#include "services/worker/worker_cli.h"

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc_server.h"
#include "common/serve_flags.h"
#include "common/store.h"
#include "prometheus/registry.h"
#include "services/worker/compile_service.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluate_service.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "spdlog/spdlog.h"
#include "common/cli.h"

namespace kforge {
namespace {

struct WorkerArgs {
  ServeFlags serve;
  std::string gpus = "0";
  double time_limit_s = 60;
};

void Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "kforge serve worker: %s\n", message.c_str());
  cli::SetExitCode(code);
}

absl::StatusOr<std::vector<int>> ParseGpus(const std::string& list) {
  std::vector<int> gpus;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    int index = 0;
    if (!absl::SimpleAtoi(part, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus: '", part, "' is not a GPU index; pass a comma-separated list like 0,1"));
    }
    gpus.push_back(index);
  }
  if (gpus.empty()) return absl::InvalidArgumentError("--gpus: no GPU index given");
  return gpus;
}

void RunWorker(const WorkerArgs& args) {
  absl::StatusOr<std::vector<int>> gpus = ParseGpus(args.gpus);
  if (!gpus.ok()) return Fail(std::string(gpus.status().message()));
  std::unique_ptr<Store> store;
  if (!args.serve.store_url.empty()) {
    absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(args.serve.store_url);
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    store = *std::move(opened);
  }
  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, store.get());
  if (!compiler.ok()) return Fail(std::string(compiler.status().message()), 3);
  EvaluatorOptions evaluator_options;
  evaluator_options.gpus = *gpus;
  evaluator_options.default_time_limit_s = args.time_limit_s;
  absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(evaluator_options);
  if (!evaluator.ok()) return Fail(std::string(evaluator.status().message()), 3);
  EvaluationPipeline pipeline(compiler->get(), evaluator->get(), store.get());

  // The services register their metrics at construction, so the server serves this registry.
  auto registry = std::make_shared<prometheus::Registry>();
  CompileServiceImpl compile_service(compiler->get(), registry.get());
  EvaluateServiceImpl evaluate_service(&pipeline, evaluator->get(), registry.get());

  absl::StatusOr<ServerOptions> options = ToServerOptions(args.serve);
  if (!options.ok()) return Fail(std::string(options.status().message()));
  options->registry = registry;
  absl::StatusOr<std::unique_ptr<GrpcServer>> server =
      GrpcServer::Create(*options, {&compile_service, &evaluate_service});
  if (!server.ok()) return Fail(std::string(server.status().message()), 3);

  // GPUs are probed in the background so the port answers health checks at once.
  std::thread([e = evaluator->get()] {
    absl::StatusOr<std::vector<v1::GpuInfo>> info = e->GetGpuInfo();
    if (!info.ok()) {
      spdlog::warn("worker: {}", std::string(info.status().message()));
      return;
    }
    for (const v1::GpuInfo& gpu : *info) {
      spdlog::info("worker: GPU {} {} ({}, {} SMs, copy bandwidth {:.0f} GB/s)", gpu.index(),
                   gpu.name(), gpu.arch(), gpu.sm_count(),
                   gpu.copy_bandwidth_bytes_per_s() / 1e9);
    }
  }).detach();

  spdlog::info("worker: serving CompileService and EvaluateService on port {}{}",
               (*server)->port(),
               (*server)->metrics_port() > 0
                   ? absl::StrCat(", /metrics on port ", (*server)->metrics_port())
                   : "");
  ServeUntilSignal(**server);
}

}  // namespace

void RegisterWorkerCommands(CLI::App& app) {
  CLI::App* serve = cli::ServeCommand(app);
  auto args = std::make_shared<WorkerArgs>();
  CLI::App* cmd = serve->add_subcommand(
      "worker", "Serve CompileService and EvaluateService on this GPU node");
  AddServeFlags(cmd, &args->serve, "0.0.0.0:50052",
                "shared cache and captured inputs: dir:PATH or redis://HOST:PORT[/DB]");
  cmd->add_option("--gpus", args->gpus, "GPU indices to evaluate on, e.g. 0,1");
  cmd->add_option("--time-limit", args->time_limit_s,
                  "seconds per candidate when the policy sets none")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { RunWorker(*args); });
}

}  // namespace kforge
