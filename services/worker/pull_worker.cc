// PullWorker: lease, run, heartbeat, complete (see pull_worker.h).
#include "services/worker/pull_worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/worker/evaluate_service.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string DefaultWorkerId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] ? host : "worker", "-", getpid());
}

}  // namespace

PullWorker::PullWorker(PullWorkerOptions options, TaskHandlers handlers,
                       prometheus::Registry* registry)
    : options_(std::move(options)), handlers_(std::move(handlers)) {
  if (options_.worker_id.empty()) options_.worker_id = DefaultWorkerId();
  options_.max_outstanding = std::max(1, options_.max_outstanding);
  if (!handlers_.evaluate) handlers_.gpus.clear();
  stub_ = v1::WorkerPool::NewStub(MakeChannel(options_.coordinator, options_.client));
  if (registry != nullptr) {
    tasks_ = &prometheus::BuildCounter()
                  .Name("kforge_worker_tasks_total")
                  .Help(
                      "Pool tasks this worker ran, by kind and by what became of the result "
                      "(accepted, rejected as stale, abandoned)")
                  .Register(*registry);
  }
}

PullWorker::~PullWorker() { Stop(); }

void PullWorker::Count(const std::string& kind, const std::string& result) {
  if (tasks_ != nullptr) tasks_->Add({{"kind", kind}, {"result", result}}).Increment();
}

void PullWorker::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  if (lease_call_ != nullptr) lease_call_->TryCancel();
  changed_.notify_all();
}

v1::WorkerInfo PullWorker::Info() {
  v1::WorkerInfo info;
  info.set_worker_id(options_.worker_id);
  for (const v1::GpuInfo& gpu : handlers_.gpus) *info.add_gpus() = gpu;
  info.set_state(stopping_      ? v1::WORKER_DRAINING
                 : running_ > 0 ? v1::WORKER_BUSY
                                : v1::WORKER_IDLE);
  info.set_max_outstanding(options_.max_outstanding);
  return info;
}

void PullWorker::Run() {
  spdlog::info("worker {}: pulling work from {} ({}; up to {} tasks at once)", options_.worker_id,
               options_.coordinator,
               handlers_.gpus.empty()
                   ? std::string("no GPU: compile tasks only")
                   : absl::StrCat(handlers_.gpus.size(), " GPU(s), ", handlers_.gpus[0].name(), " ",
                                  handlers_.gpus[0].arch()),
               options_.max_outstanding);
  std::vector<std::thread> threads;
  for (int i = 0; i < options_.max_outstanding; ++i) {
    threads.emplace_back([this] { ExecutorLoop(); });
  }
  threads.emplace_back([this] { HeartbeatLoop(); });
  LeaseLoop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads) t.join();
  spdlog::info("worker {}: stopped", options_.worker_id);
}

void PullWorker::LeaseLoop() {
  bool reachable = true;
  while (true) {
    v1::LeaseRequest request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] {
        return stopping_ || static_cast<int>(held_.size()) < options_.max_outstanding;
      });
      if (stopping_) return;
      *request.mutable_worker() = Info();
      request.set_max_tasks(options_.max_outstanding - static_cast<int>(held_.size()));
    }
    request.set_wait_s(options_.lease_wait_s);
    grpc::ClientContext context;
    context.set_deadline(In(options_.lease_wait_s + 10));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      lease_call_ = &context;
    }
    v1::LeaseResponse response;
    grpc::Status status = stub_->Lease(&context, request, &response);
    {
      std::lock_guard<std::mutex> lock(mu_);
      lease_call_ = nullptr;
      if (stopping_) return;
    }
    if (!status.ok()) {
      if (reachable) {
        spdlog::warn("worker {}: cannot lease from {}: {} (retrying)", options_.worker_id,
                     options_.coordinator, status.error_message());
      }
      reachable = false;
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, std::chrono::duration<double>(options_.retry_backoff_s),
                        [&] { return stopping_; });
      continue;
    }
    if (!reachable) spdlog::info("worker {}: coordinator reachable again", options_.worker_id);
    reachable = true;
    if (response.tasks().empty()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const double now = UnixNow();
      for (const v1::Task& task : response.tasks()) {
        held_[task.lease_id()] = Held{task, std::max(0.3, task.lease_expiry_unix_s() - now)};
        queue_.push_back(task.lease_id());
      }
    }
    changed_.notify_all();
  }
}

void PullWorker::ExecutorLoop() {
  while (true) {
    v1::Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return !queue_.empty() || (stopping_ && held_.empty()); });
      if (queue_.empty()) return;
      task = held_.at(queue_.front()).task;
      queue_.pop_front();
      ++running_;
    }
    Execute(task);
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.erase(task.lease_id());
      --running_;
    }
    changed_.notify_all();
  }
}

void PullWorker::Execute(const v1::Task& task) {
  std::string result;
  if (task.kind() == v1::TASK_COMPILE) {
    v1::CompileRequest request;
    if (!request.ParseFromString(task.request())) {
      spdlog::error("worker {}: task {} holds no CompileRequest; dropped", options_.worker_id,
                    task.task_id());
      Count("compile", "abandoned");
      return;
    }
    spdlog::info("worker {}: compiling task {} (candidate {}, attempt {})", options_.worker_id,
                 task.task_id().substr(0, 12), request.candidate().id().substr(0, 12),
                 task.attempt());
    v1::CompileResult compiled = handlers_.compile(request);
    // The coordinator needs the status, log and resources; the cubin and PTX stay in the
    // shared compile cache for the evaluating worker.
    compiled.clear_cubin();
    compiled.clear_ptx();
    result = compiled.SerializeAsString();
  } else if (task.kind() == v1::TASK_EVALUATE && handlers_.evaluate) {
    v1::EvaluateRequest request;
    if (!request.ParseFromString(task.request())) {
      spdlog::error("worker {}: task {} holds no EvaluateRequest; dropped", options_.worker_id,
                    task.task_id());
      Count("evaluate", "abandoned");
      return;
    }
    spdlog::info("worker {}: evaluating task {} (candidate {}, attempt {}{})", options_.worker_id,
                 task.task_id().substr(0, 12), request.candidate().id().substr(0, 12),
                 task.attempt(), request.fresh_process() ? ", fresh process" : "");
    v1::EvaluationResult evaluation = handlers_.evaluate(request);
    if (evaluation.verdict() == v1::NOT_EVALUATED ||
        evaluation.verdict() == v1::VERDICT_UNSPECIFIED) {
      // Says something about this machine, not the candidate: let the lease lapse so another
      // worker takes it, and stop asking for evaluations.
      spdlog::error("worker {}: cannot evaluate here ({}); offering compile tasks only from now",
                    options_.worker_id, evaluation.diagnostics().message());
      std::lock_guard<std::mutex> lock(mu_);
      handlers_.gpus.clear();
      Count("evaluate", "abandoned");
      return;
    }
    result = evaluation.SerializeAsString();
  } else {
    spdlog::error("worker {}: task {} of kind {} cannot run here; dropped", options_.worker_id,
                  task.task_id(), v1::TaskKind_Name(task.kind()));
    Count("unknown", "abandoned");
    return;
  }
  const std::string kind = task.kind() == v1::TASK_COMPILE ? "compile" : "evaluate";
  const bool accepted = Hand(task, result);
  Count(kind, accepted ? "accepted" : "rejected");
  spdlog::info("worker {}: task {} {}", options_.worker_id, task.task_id().substr(0, 12),
               accepted ? "completed" : "rejected as stale (its lease lapsed)");
}

bool PullWorker::Hand(const v1::Task& task, const std::string& result) {
  v1::CompleteRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_lease_id(task.lease_id());
  request.set_task_id(task.task_id());
  request.set_result(result);
  // A coordinator that restarts comes back within seconds; a result is worth the wait.
  for (int attempt = 0; attempt < 20; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(In(30));
    v1::CompleteResponse response;
    grpc::Status status = stub_->Complete(&context, request, &response);
    if (status.ok()) return response.accepted();
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      spdlog::warn("worker {}: Complete of task {} failed: {}", options_.worker_id,
                   task.task_id().substr(0, 12), status.error_message());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.retry_backoff_s));
  }
  return false;
}

void PullWorker::HeartbeatLoop() {
  while (true) {
    v1::HeartbeatRequest request;
    double next_s = 1.0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_ && held_.empty()) return;
      request.set_worker_id(options_.worker_id);
      for (const auto& [lease_id, held] : held_) {
        request.add_lease_ids(lease_id);
        // A third of the shortest lease: one lost beat does not lose the lease.
        next_s = std::min(next_s, held.duration_s / 3);
      }
    }
    if (request.lease_ids_size() > 0) {
      grpc::ClientContext context;
      context.set_deadline(In(5));
      v1::HeartbeatResponse response;
      grpc::Status status = stub_->Heartbeat(&context, request, &response);
      for (const std::string& expired : response.expired_lease_ids()) {
        spdlog::warn(
            "worker {}: lease {} lapsed at the coordinator; its result will be "
            "offered but may be refused",
            options_.worker_id, expired);
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::duration<double>(next_s),
                      [&] { return stopping_ && held_.empty(); });
  }
}

}  // namespace kforge
