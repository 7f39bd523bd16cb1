// `kforge serve coordinator` and its clients `kforge submit|watch|jobs` (see coordinator_cli.h).
#include "services/coordinator/service/coordinator_cli.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cli.h"
#include "common/grpc_server.h"
#include "common/serve_flags.h"
#include "common/status.h"
#include "common/store.h"
#include "common/tensor_signature.h"
#include "kforge/v1/coordinator.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "prometheus/registry.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/coordinator/pool/task_pool.h"
#include "services/coordinator/pool/worker_pool_service.h"
#include "services/coordinator/service/job_manager.h"
#include "services/coordinator/service/job_service.h"
#include "services/proposer/proposal_service.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

constexpr size_t kUploadChunkBytes = 1 << 20;

// ---------------------------------------------------------------- serve coordinator

struct ServeArgs {
  ServeFlags serve;
  std::string proposer_address;
  std::string capture_address;
  double capture_timeout_s = 1800;
  std::string arch = "sm_90";
  double lease_duration_s = 30;
  int max_attempts = 3;
  int max_in_flight = 16;
  int max_in_flight_per_target = 4;
};

void ServeFail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "kforge serve coordinator: %s\n", message.c_str());
  cli::SetExitCode(code);
}

void RunServe(const ServeArgs& args) {
  if (args.serve.store_url.empty()) {
    return ServeFail(
        "--store is required: jobs, search trees and results live there (redis://HOST:PORT "
        "in a cluster, dir:PATH on one machine)");
  }
  if (args.proposer_address.empty()) {
    return ServeFail(
        "--proposer-address is required: start `kforge serve proposer` and pass "
        "its HOST:PORT");
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(args.serve.store_url);
  if (!store.ok()) return ServeFail(std::string(store.status().message()));
  if (absl::StatusOr<std::optional<std::string>> probe = (*store)->Get("kforge/probe");
      !probe.ok()) {
    return ServeFail(absl::StrCat("cannot reach store ", args.serve.store_url, ": ",
                                  probe.status().message(), "; start it or fix --store"),
                     3);
  }
  absl::StatusOr<ServerOptions> options = ToServerOptions(args.serve);
  if (!options.ok()) return ServeFail(std::string(options.status().message()));

  TaskPoolOptions pool_options;
  pool_options.leases.lease_duration_s = args.lease_duration_s;
  pool_options.leases.max_attempts = args.max_attempts;
  pool_options.lapse_interval_s = std::min(0.5, args.lease_duration_s / 4);
  // Finished results also live in the store; memory keeps the recent ones for merging.
  pool_options.leases.max_finished_retained = 20000;
  TaskPool pool(pool_options, store->get());

  ProposalServiceClient proposer(MakeChannel(args.proposer_address, {}));
  CaptureFunction capture;
  if (!args.capture_address.empty()) {
    capture = RemoteCapture(MakeChannel(args.capture_address, {}), args.capture_timeout_s);
  }
  JobManagerOptions job_options;
  job_options.default_arch = args.arch;
  job_options.max_in_flight = args.max_in_flight;
  job_options.max_in_flight_per_target = args.max_in_flight_per_target;
  auto registry = std::make_shared<prometheus::Registry>();
  JobManager jobs(**store, pool, proposer, std::move(capture), job_options, registry.get());

  WorkerPoolServiceImpl pool_service(&pool);
  JobServiceImpl job_service(&jobs, store->get());
  options->registry = registry;
  absl::StatusOr<std::unique_ptr<GrpcServer>> server =
      GrpcServer::Create(*options, {&job_service, &pool_service});
  if (!server.ok()) return ServeFail(std::string(server.status().message()), 3);
  if (absl::Status started = jobs.Start(); !started.ok()) {
    return ServeFail(
        absl::StrCat("cannot load the jobs from ", args.serve.store_url, ": ", started.message()),
        3);
  }
  spdlog::info(
      "coordinator: serving JobService and WorkerPool on port {} (store {}, proposer {}, "
      "capture {}){}",
      (*server)->port(), (*store)->Describe(), args.proposer_address,
      args.capture_address.empty() ? "none" : args.capture_address,
      (*server)->metrics_port() > 0 ? absl::StrCat(", /metrics on port ", (*server)->metrics_port())
                                    : "");
  if (args.capture_address.empty()) {
    spdlog::warn("coordinator: no --capture-address; submitted jobs will fail at capture");
  }
  ServeUntilSignal(**server);
  jobs.Shutdown();  // jobs stay resumable in the store
  pool.Shutdown();
}

// ---------------------------------------------------------------- clients

struct ClientArgs {
  std::string coordinator;
  std::string token_env;
  std::string tls_ca;
  bool json = false;
};

void AddClientFlags(CLI::App* cmd, ClientArgs* args) {
  const char* env = std::getenv("KFORGE_COORDINATOR");
  args->coordinator = env != nullptr && *env != '\0' ? env : "localhost:50050";
  cmd->add_option("--coordinator", args->coordinator,
                  "coordinator HOST:PORT (default $KFORGE_COORDINATOR, else localhost:50050)");
  cmd->add_option("--token-env", args->token_env,
                  "environment variable holding the coordinator's bearer token");
  cmd->add_option("--tls-ca", args->tls_ca, "CA certificate (PEM): connect with TLS");
  cmd->add_flag("--json", args->json, "print JSON");
}

// The stub, or nullptr after printing why.
std::unique_ptr<v1::JobService::Stub> Connect(const char* command, const ClientArgs& args) {
  ClientOptions options;
  options.tls_ca_file = args.tls_ca;
  if (!args.token_env.empty()) {
    const char* token = std::getenv(args.token_env.c_str());
    if (token == nullptr || *token == '\0') {
      std::fprintf(stderr, "kforge %s: --token-env: $%s is not set\n", command,
                   args.token_env.c_str());
      cli::SetExitCode(2);
      return nullptr;
    }
    options.auth_token = token;
  }
  return v1::JobService::NewStub(MakeChannel(args.coordinator, options));
}

// Prints a failed call: 3 when the coordinator is unreachable, 1 for its errors, 2 for ours.
void CallFailed(const char* command, const ClientArgs& args, const grpc::Status& status) {
  int code = 1;
  std::string hint;
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    code = 3;
    hint = absl::StrCat(" (is `kforge serve coordinator` running at ", args.coordinator,
                        "? pass --coordinator HOST:PORT)");
  } else if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
             status.error_code() == grpc::StatusCode::NOT_FOUND) {
    code = 2;
  }
  std::fprintf(stderr, "kforge %s: %s%s\n", command, status.error_message().c_str(), hint.c_str());
  cli::SetExitCode(code);
}

std::unique_ptr<grpc::ClientContext> Context(double deadline_s) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (deadline_s > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
  }
  return context;
}

nlohmann::json TargetJson(const v1::TargetProgress& t) {
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [verdict, n] : t.verdict_counts()) counts[verdict] = n;
  return {{"target_id", t.target().id()},
          {"op", TargetOpName(t.target())},
          {"signature", TargetSignature(t.target())},
          {"share", t.target().share()},
          {"iterations", t.iterations()},
          {"best_speedup", t.best_speedup()},
          {"best_candidate_id", t.best_candidate_id()},
          {"reconfirmed", t.best().reconfirmed()},
          {"verdict_counts", counts}};
}

nlohmann::json JobJson(const v1::Job& job) {
  nlohmann::json targets = nlohmann::json::array();
  for (const v1::TargetProgress& t : job.targets()) targets.push_back(TargetJson(t));
  return {{"job_id", job.id()},
          {"state", JobStateName(job.state())},
          {"message", job.message()},
          {"error", job.error()},
          {"model", job.spec().model().sha256()},
          {"model_name", job.spec().model_name()},
          {"seed", std::to_string(job.spec().seed())},
          {"proposer", job.spec().proposer()},
          {"arch", job.spec().arch()},
          {"gpu", job.gpu().name()},
          {"created_unix_s", job.created_unix_s()},
          {"updated_unix_s", job.updated_unix_s()},
          {"targets", targets}};
}

// ---- submit

struct SubmitArgs {
  ClientArgs client;
  std::string model, inputs, name, proposer = "synth", device = "cuda", arch;
  std::vector<std::string> targets;
  int top = 5, iterations = 64;
  double time_budget_s = 0;
  uint64_t seed = 0;
};

absl::StatusOr<v1::Digest> UploadFile(v1::JobService::Stub& stub, const std::string& path,
                                      const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot open it"));
  }
  auto context = Context(3600);
  v1::Digest digest;
  std::unique_ptr<grpc::ClientWriter<v1::UploadChunk>> writer(stub.Upload(context.get(), &digest));
  std::string buffer(kUploadChunkBytes, '\0');
  while (file) {
    file.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = file.gcount();
    if (n <= 0) break;
    v1::UploadChunk chunk;
    chunk.set_data(buffer.data(), static_cast<size_t>(n));
    if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return digest;
}

void RunSubmit(const SubmitArgs& args) {
  std::unique_ptr<v1::JobService::Stub> stub = Connect("submit", args.client);
  if (!stub) return;
  v1::JobSpec spec;
  for (auto [path, what, digest] :
       {std::make_tuple(args.model, "model", spec.mutable_model()),
        std::make_tuple(args.inputs, "--inputs", spec.mutable_inputs())}) {
    absl::StatusOr<v1::Digest> uploaded = UploadFile(*stub, path, what);
    if (!uploaded.ok()) {
      const bool unreachable =
          absl::IsUnavailable(uploaded.status()) || absl::IsDeadlineExceeded(uploaded.status());
      std::fprintf(stderr, "kforge submit: uploading %s: %s%s\n", path.c_str(),
                   std::string(uploaded.status().message()).c_str(),
                   unreachable ? absl::StrCat(" (is `kforge serve coordinator` running at ",
                                              args.client.coordinator, "?)")
                                     .c_str()
                               : "");
      cli::SetExitCode(unreachable ? 3 : 2);
      return;
    }
    *digest = *uploaded;
  }
  spec.set_model_name(args.name.empty() ? std::filesystem::path(args.model).stem().string()
                                        : args.name);
  spec.set_top_k(args.top);
  for (const std::string& t : args.targets) spec.add_target_ids(t);
  spec.mutable_budget()->set_iterations_per_target(args.iterations);
  spec.mutable_budget()->set_time_budget_s(args.time_budget_s);
  spec.set_proposer(args.proposer);
  spec.set_seed(args.seed);
  spec.set_device(args.device);
  spec.set_arch(args.arch);
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitResponse response;
  auto context = Context(60);
  grpc::Status status = stub->Submit(context.get(), request, &response);
  if (!status.ok()) return CallFailed("submit", args.client, status);
  if (args.client.json) {
    std::cout << nlohmann::json{{"job_id", response.job_id()},
                                {"model", spec.model().sha256()},
                                {"inputs", spec.inputs().sha256()}}
                     .dump()
              << "\n";
  } else {
    std::cout << response.job_id() << "\n";
    std::fprintf(
        stderr, "kforge submit: job %s submitted to %s; follow it with `kforge watch %s`\n",
        response.job_id().c_str(), args.client.coordinator.c_str(), response.job_id().c_str());
  }
}

// ---- watch

struct WatchArgs {
  ClientArgs client;
  std::string job_id;
};

std::string ProgressLine(const v1::Job& job) {
  std::vector<std::string> parts;
  for (const v1::TargetProgress& t : job.targets()) {
    parts.push_back(absl::StrFormat("%s %d it best %.2fx", TargetOpName(t.target()), t.iterations(),
                                    t.best_speedup()));
  }
  return absl::StrJoin(parts, " | ");
}

void RunWatch(const WatchArgs& args) {
  std::unique_ptr<v1::JobService::Stub> stub = Connect("watch", args.client);
  if (!stub) return;
  v1::WatchJobRequest request;
  request.set_job_id(args.job_id);
  auto context = Context(0);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader(stub->Watch(context.get(), request));
  v1::JobEvent event;
  v1::Job last;
  while (reader->Read(&event)) {
    last = event.job();
    if (args.client.json) {
      nlohmann::json line = JobJson(event.job());
      line["kind"] = event.kind();
      line["event"] = event.message();
      std::cout << line.dump() << "\n" << std::flush;
    } else {
      std::cout << absl::StrFormat("[%s] %s", event.kind(), event.message());
      if (event.kind() == "iteration" || event.kind() == "best") {
        std::cout << "   (" << ProgressLine(event.job()) << ")";
      }
      std::cout << "\n" << std::flush;
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return CallFailed("watch", args.client, status);
  if (last.state() == v1::JOB_DONE) return;
  if (last.state() == v1::JOB_FAILED) {
    std::fprintf(stderr, "kforge watch: job %s failed: %s\n", args.job_id.c_str(),
                 last.error().c_str());
  } else {
    std::fprintf(stderr, "kforge watch: job %s ended %s\n", args.job_id.c_str(),
                 JobStateName(last.state()).c_str());
  }
  cli::SetExitCode(1);
}

// ---- jobs

void RunJobs(const ClientArgs& args) {
  std::unique_ptr<v1::JobService::Stub> stub = Connect("jobs", args);
  if (!stub) return;
  v1::ListJobsResponse response;
  auto context = Context(30);
  grpc::Status status = stub->List(context.get(), v1::ListJobsRequest(), &response);
  if (!status.ok()) return CallFailed("jobs", args, status);
  if (args.json) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const v1::Job& job : response.jobs()) jobs.push_back(JobJson(job));
    std::cout << jobs.dump(2) << "\n";
    return;
  }
  std::cout << absl::StrFormat("%-21s %-10s %-16s %7s %10s  %s\n", "JOB", "STATE", "MODEL",
                               "TARGETS", "BEST", "MESSAGE");
  for (const v1::Job& job : response.jobs()) {
    double best = 0;
    for (const v1::TargetProgress& t : job.targets()) best = std::max(best, t.best_speedup());
    std::cout << absl::StrFormat(
        "%-21s %-10s %-16s %7d %10s  %s\n", job.id(), JobStateName(job.state()),
        job.spec().model_name().substr(0, 16), job.targets_size(),
        best > 0 ? absl::StrFormat("%.2fx", best) : "-", job.message().substr(0, 100));
  }
}

}  // namespace

void RegisterCoordinatorCommands(CLI::App& app) {
  {
    CLI::App* serve = cli::ServeCommand(app);
    auto args = std::make_shared<ServeArgs>();
    CLI::App* cmd = serve->add_subcommand(
        "coordinator",
        "Serve JobService (jobs, trees, results) and WorkerPool (workers pull tasks)");
    AddServeFlags(cmd, &args->serve, "0.0.0.0:50050",
                  "where jobs, trees and results live (required): redis://HOST:PORT[/DB] or "
                  "dir:PATH");
    cmd->add_option("--proposer-address", args->proposer_address,
                    "ProposalService HOST:PORT (`kforge serve proposer`)");
    cmd->add_option("--capture-address", args->capture_address,
                    "CaptureService HOST:PORT (`kforge serve capture`), sharing --store");
    cmd->add_option("--capture-timeout", args->capture_timeout_s, "seconds one capture may take")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_option("--arch", args->arch, "GPU arch of jobs that name none")->capture_default_str();
    cmd->add_option("--lease-duration", args->lease_duration_s,
                    "seconds a worker's lease lasts without a heartbeat")
        ->check(CLI::Range(0.2, 3600.0))
        ->capture_default_str();
    cmd->add_option("--max-attempts", args->max_attempts,
                    "leases a task may lapse before its candidate is marked failed")
        ->check(CLI::Range(1, 100))
        ->capture_default_str();
    cmd->add_option("--max-in-flight", args->max_in_flight, "evaluations outstanding per job")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    cmd->add_option("--max-in-flight-per-target", args->max_in_flight_per_target,
                    "evaluations outstanding per target")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd->callback([args] { RunServe(*args); });
  }
  {
    auto args = std::make_shared<SubmitArgs>();
    CLI::App* cmd = app.add_subcommand(
        "submit", "Upload a model and its inputs to a coordinator and start a job; prints its id");
    cmd->add_option("model", args->model, "TorchScript model (torch.jit.save)")->required();
    cmd->add_option("--inputs", args->inputs, "example inputs (torch.save)")->required();
    cmd->add_option("--name", args->name, "model name for listings (default: the file's stem)");
    cmd->add_option("--top", args->top, "targets to search (highest time share first)")
        ->capture_default_str();
    cmd->add_option("--target", args->targets,
                    "search this target id (repeatable; overrides --top)");
    cmd->add_option("--iterations", args->iterations, "evaluations per target")
        ->capture_default_str();
    cmd->add_option("--time-budget", args->time_budget_s, "wall seconds of search; 0: none")
        ->capture_default_str();
    cmd->add_option("--proposer", args->proposer, "synth, openai or anthropic")
        ->capture_default_str();
    cmd->add_option("--seed", args->seed, "search seed (same seed, same search)")
        ->capture_default_str();
    cmd->add_option("--device", args->device, "capture device: cuda or cpu")->capture_default_str();
    cmd->add_option("--arch", args->arch, "GPU arch to search on (default: the coordinator's)");
    AddClientFlags(cmd, &args->client);
    cmd->callback([args] { RunSubmit(*args); });
  }
  {
    auto args = std::make_shared<WatchArgs>();
    CLI::App* cmd = app.add_subcommand(
        "watch", "Stream a job's progress until it ends (exit 0 when it is done)");
    cmd->add_option("job", args->job_id, "job id (from kforge submit)")->required();
    AddClientFlags(cmd, &args->client);
    cmd->callback([args] { RunWatch(*args); });
  }
  {
    auto args = std::make_shared<ClientArgs>();
    CLI::App* cmd = app.add_subcommand("jobs", "List a coordinator's jobs, newest first");
    AddClientFlags(cmd, args.get());
    cmd->callback([args] { RunJobs(*args); });
  }
}

}  // namespace kforge
