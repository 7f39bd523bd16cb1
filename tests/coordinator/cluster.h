// The coordinator cluster of the coordinator tests: a real redis-server and `kforge serve
// capture|proposer|coordinator|worker` as separate processes on loopback, the model made by
// make_model.py, and helpers to drive it with `kforge submit|watch|jobs` and JobService.
// Workers use the test-only SimulatedEvaluator unless the cluster is made for a real GPU.
#pragma once

#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/store.h"
#include "kforge/v1/coordinator.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/command.h"
#include "tests/support/free_port.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace kforge::cluster_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A `kforge` child process with its output in a log file; killed (SIGKILL) when destroyed.
class KforgeProcess {
 public:
  KforgeProcess(std::vector<std::string> args, fs::path log) : args_(std::move(args)), log_(log) {
    Start();
  }
  ~KforgeProcess() { Kill(); }

  void Start() {
    std::vector<std::string> argv = {KFORGE_BINARY};
    argv.insert(argv.end(), args_.begin(), args_.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, KFORGE_BINARY, &actions, nullptr, cargv.data(), environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  bool running() const { return pid_ > 0; }
  std::string Log() const { return ReadWholeFile(log_); }
  const fs::path& log_path() const { return log_; }

 private:
  std::vector<std::string> args_;
  fs::path log_;
  pid_t pid_ = -1;
};

inline bool WaitFor(const std::function<bool()>& condition, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1e3));
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

inline bool WaitForServer(const std::string& address, double timeout_s) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  return channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::milliseconds(static_cast<int>(timeout_s * 1e3)));
}

inline std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

// The cluster every test uses, started once.
struct Cluster {
  // false: workers evaluate on GPU 0 of this machine (the gpu-labelled test).
  bool simulated = true;
  std::string device = "cpu";  // capture device of the submitted jobs
  TempDir tmp;
  RedisServerProcess redis;
  std::string model, inputs;
  int coordinator_port = 0, metrics_port = 0;
  std::string capture_address, proposer_address;
  std::unique_ptr<KforgeProcess> capture, proposer, coordinator, fast_worker;
  std::string setup_error;

  std::string coordinator_address() const { return Loopback(coordinator_port); }

  std::vector<std::string> CoordinatorArgs() const {
    return {"serve", "coordinator", "--listen", coordinator_address(), "--metrics",
            Loopback(metrics_port), "--store", redis.url(), "--proposer-address", proposer_address,
            "--capture-address", capture_address,
            // Short leases so a dead worker is noticed within seconds.
            "--lease-duration", "2", "--max-attempts", "3", "--max-in-flight", "4",
            "--max-in-flight-per-target", "2"};
  }

  void StartCoordinator() {
    coordinator = std::make_unique<KforgeProcess>(CoordinatorArgs(), tmp / "coordinator.log");
  }

  std::unique_ptr<KforgeProcess> StartWorker(const std::string& id, double delay_s,
                                             int max_outstanding) {
    std::vector<std::string> args = {
        "serve",       "worker",    "--listen",          "127.0.0.1:0",
        "--store",     redis.url(), "--coordinator",     coordinator_address(),
        "--worker-id", id,          "--max-outstanding", std::to_string(max_outstanding)};
    if (simulated) {
      args.insert(args.end(),
                  {"--simulated-evaluator", "--simulated-delay", std::to_string(delay_s)});
    } else {
      args.insert(args.end(), {"--gpus", "0"});
    }
    return std::make_unique<KforgeProcess>(args, tmp / (id + ".log"));
  }

  void SetUp(bool start_fast_worker = true) {
    if (!redis.status().ok()) {
      setup_error = std::string(redis.status().message());
      return;
    }
    CommandResult made =
        RunCommand(Quote(Python()) + " " + Quote(KFORGE_COORDINATOR_TEST_DIR "/make_model.py") +
                       " " + Quote((tmp / "model").string()),
                   tmp.path());
    if (made.exit_code != 0) {
      setup_error = "make_model.py failed: " + made.out + made.err;
      return;
    }
    model = (tmp / "model" / "model.pt").string();
    inputs = (tmp / "model" / "inputs.pt").string();
    capture_address = Loopback(FreeLoopbackPort());
    proposer_address = Loopback(FreeLoopbackPort());
    coordinator_port = FreeLoopbackPort();
    metrics_port = FreeLoopbackPort();
    capture = std::make_unique<KforgeProcess>(
        std::vector<std::string>{"serve", "capture", "--listen", capture_address, "--store",
                                 redis.url()},
        tmp / "capture.log");
    proposer = std::make_unique<KforgeProcess>(
        std::vector<std::string>{"serve", "proposer", "--listen", proposer_address, "--store",
                                 redis.url()},
        tmp / "proposer.log");
    StartCoordinator();
    if (start_fast_worker) fast_worker = StartWorker("fast-1", 0.05, 2);
    for (const auto& [address, process] :
         {std::pair{capture_address, capture.get()}, std::pair{proposer_address, proposer.get()},
          std::pair{coordinator_address(), coordinator.get()}}) {
      if (!WaitForServer(address, 60)) {
        setup_error = absl::StrCat("no server at ", address, ": ", process->Log());
        return;
      }
    }
  }

  CommandResult Kforge(const std::string& args) const {
    return RunCommand(
        absl::StrCat(Quote(KFORGE_BINARY), " ", args, " --coordinator ", coordinator_address()),
        tmp.path());
  }

  // `kforge submit` with `extra` flags; the job id, or "" with the failure in `why`.
  std::string Submit(const std::string& extra, std::string* why) const {
    CommandResult r = Kforge(absl::StrCat("submit ", Quote(model), " --inputs ", Quote(inputs),
                                          " --device ", device, " --json ", extra));
    nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
    if (r.exit_code != 0 || !out.is_object()) {
      *why = absl::StrCat("exit ", r.exit_code, ": ", r.out, r.err);
      return "";
    }
    return out["job_id"].get<std::string>();
  }

  std::unique_ptr<v1::JobService::Stub> Stub() const {
    return v1::JobService::NewStub(
        grpc::CreateChannel(coordinator_address(), grpc::InsecureChannelCredentials()));
  }

  absl::StatusOr<v1::Job> Get(const std::string& job_id) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    grpc::Status status = Stub()->Get(&context, request, &job);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return job;
  }

  // Every target's tree, keyed by target id.
  std::map<std::string, std::vector<v1::SearchNode>> Trees(const v1::Job& job) const {
    std::map<std::string, std::vector<v1::SearchNode>> trees;
    for (const v1::TargetProgress& t : job.targets()) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::GetTreeRequest request;
      request.set_job_id(job.id());
      request.set_target_id(t.target().id());
      v1::GetTreeResponse response;
      if (Stub()->GetTree(&context, request, &response).ok()) {
        trees[t.target().id()] = {response.nodes().begin(), response.nodes().end()};
      }
    }
    return trees;
  }

  // The model's capture the coordinator cached in the store (the first one).
  absl::StatusOr<v1::OperatorProfile> CapturedProfile() const {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(redis.url());
    if (!store.ok()) return store.status();
    absl::StatusOr<std::vector<std::string>> keys = (*store)->List("capture/");
    if (!keys.ok()) return keys.status();
    if (keys->empty()) return absl::NotFoundError("no capture/ key in the store");
    absl::StatusOr<std::optional<std::string>> bytes = (*store)->Get(keys->front());
    if (!bytes.ok()) return bytes.status();
    v1::OperatorProfile profile;
    if (!bytes->has_value() || !profile.ParseFromString(**bytes)) {
      return absl::DataLossError("the cached capture does not parse");
    }
    return profile;
  }

  std::string Metrics() const {
    CommandResult r =
        RunCommand(absl::StrCat("curl -s http://", Loopback(metrics_port), "/metrics"), tmp.path());
    return r.out;
  }
};

}  // namespace kforge::cluster_test
