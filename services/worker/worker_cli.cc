// The `kforge serve worker` subcommand (see worker_cli.h).
#include "services/worker/worker_cli.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
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
#include "services/worker/pull_worker.h"
#include "services/worker/simulated_evaluator.h"
#include "spdlog/spdlog.h"
#include "common/cli.h"

namespace kforge {
namespace {

struct WorkerArgs {
  ServeFlags serve;
  std::string gpus = "0";
  double time_limit_s = 60;
  // Pull mode: take tasks from a coordinator's worker pool.
  std::string coordinator;
  std::string coordinator_token_env;
  std::string worker_id;
  int max_outstanding = 2;
  // TEST-ONLY: evaluate with the SimulatedEvaluator instead of a GPU.
  bool simulated_evaluator = false;
  std::string simulated_arch = "sm_90";
  double simulated_delay_s = 0;
};

// The pull loop's handlers: compile with the Compiler; evaluate on the GPUs through the
// pipeline, or with the test-only SimulatedEvaluator (after a real compile).
TaskHandlers MakeHandlers(const WorkerArgs& args, Compiler* compiler, Evaluator* evaluator,
                          EvaluationPipeline* pipeline) {
  TaskHandlers handlers;
  handlers.compile = [compiler](const v1::CompileRequest& request) {
    return compiler->Compile(request.candidate(), request.options());
  };
  if (args.simulated_evaluator) {
    auto simulated = std::make_shared<SimulatedEvaluator>(args.simulated_arch);
    handlers.gpus = {simulated->Gpu()};
    const double delay_s = args.simulated_delay_s;
    handlers.evaluate = [compiler, simulated, delay_s](const v1::EvaluateRequest& request) {
      v1::CompileResult compiled = compiler->Compile(request.candidate(), request.options());
      if (compiled.status() != v1::COMPILE_OK) {
        v1::EvaluationResult result;
        result.set_verdict(v1::COMPILE_ERROR);
        result.mutable_diagnostics()->set_message(absl::StrCat(
            "the candidate did not compile (", v1::CompileStatus_Name(compiled.status()), ")"));
        return result;
      }
      if (delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      return simulated->Evaluate(request, compiled);
    };
    return handlers;
  }
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator->GetGpuInfo();
  if (!gpus.ok() || gpus->empty()) {
    spdlog::warn("worker: no GPU to evaluate on ({}); taking compile tasks only",
                 gpus.ok() ? "none found" : std::string(gpus.status().message()));
    return handlers;
  }
  handlers.gpus = *gpus;
  handlers.evaluate = [pipeline](const v1::EvaluateRequest& request) {
    return pipeline->Evaluate(request);
  };
  return handlers;
}

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

  if (!args.coordinator.empty()) {
    // Pull mode: the loop runs beside the served port (health, /metrics) until a signal.
    PullWorkerOptions pull;
    pull.coordinator = args.coordinator;
    pull.worker_id = args.worker_id;
    pull.max_outstanding = args.max_outstanding;
    if (!args.coordinator_token_env.empty()) {
      const char* token = std::getenv(args.coordinator_token_env.c_str());
      if (token == nullptr || *token == '\0') {
        return Fail(absl::StrCat("--coordinator-token-env: $", args.coordinator_token_env,
                                 " is not set; export the coordinator's token there"));
      }
      pull.client.auth_token = token;
    }
    std::unique_ptr<PullWorker> worker;
    std::mutex worker_mu;
    bool stopped = false;
    std::thread loop([&] {
      // Probing the GPUs starts the evaluator children: after the port is up.
      TaskHandlers handlers = MakeHandlers(args, compiler->get(), evaluator->get(), &pipeline);
      {
        std::lock_guard<std::mutex> lock(worker_mu);
        if (stopped) return;
        worker = std::make_unique<PullWorker>(pull, std::move(handlers), registry.get());
      }
      worker->Run();
    });
    ServeUntilSignal(**server);
    {
      std::lock_guard<std::mutex> lock(worker_mu);
      stopped = true;
      if (worker) worker->Stop();
    }
    loop.join();
    return;
  }

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
  cmd->add_option("--coordinator", args->coordinator,
                  "pull tasks from this coordinator's worker pool (HOST:PORT) instead of only "
                  "serving CompileService/EvaluateService");
  cmd->add_option("--coordinator-token-env", args->coordinator_token_env,
                  "environment variable holding the coordinator's bearer token");
  cmd->add_option("--worker-id", args->worker_id, "id in the pool (default HOSTNAME-PID)");
  cmd->add_option("--max-outstanding", args->max_outstanding,
                  "pool tasks held at once (compiles run beside a timed evaluation)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_flag("--simulated-evaluator", args->simulated_evaluator,
                "TEST-ONLY: no GPU; verdicts and timings are a deterministic function of the "
                "kernel's parameters (SimulatedEvaluator), not measurements. For CI of the "
                "coordinator; never for real results");
  cmd->add_option("--simulated-arch", args->simulated_arch,
                  "TEST-ONLY: the arch the simulated GPU reports")
      ->capture_default_str();
  cmd->add_option("--simulated-delay", args->simulated_delay_s,
                  "TEST-ONLY: seconds each simulated evaluation takes")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args] {
    if (!args->simulated_evaluator && (args->simulated_delay_s > 0)) {
      return Fail("--simulated-delay needs --simulated-evaluator");
    }
    if (args->simulated_evaluator && args->coordinator.empty()) {
      return Fail("--simulated-evaluator needs --coordinator (it serves only the pull loop)");
    }
    RunWorker(*args);
  });
}

}  // namespace kforge
