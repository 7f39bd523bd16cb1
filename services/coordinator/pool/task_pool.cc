// TaskPool: waiters, long-poll, lapse pass and persisted results over the LeaseTable.
#include "services/coordinator/pool/task_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "kforge/v1/worker.pb.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

std::string ResultKey(const std::string& task_id) { return absl::StrCat("task/", task_id); }

std::chrono::duration<double> Seconds(double s) { return std::chrono::duration<double>(s); }

}  // namespace

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string TaskId(v1::TaskKind kind, const google::protobuf::Message& request) {
  return MakeDigest(absl::StrCat(v1::TaskKind_Name(kind), "\n", DeterministicBytes(request)))
      .sha256();
}

TaskPool::TaskPool(TaskPoolOptions options, Store* store, LeaseTable::Clock clock)
    : options_(options), store_(store), clock_(clock), table_(options.leases, std::move(clock)) {
  lapse_thread_ = std::thread([this] { LapseLoop(); });
}

TaskPool::~TaskPool() { Shutdown(); }

void TaskPool::Shutdown() {
  std::unordered_map<std::string, std::vector<ResultCallback>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    waiters.swap(waiters_);
  }
  work_.notify_all();
  stop_lapse_.notify_all();
  if (lapse_thread_.joinable()) lapse_thread_.join();
  for (auto& [task_id, callbacks] : waiters) {
    for (ResultCallback& done : callbacks) {
      done(absl::CancelledError(
          absl::StrCat("the worker pool shut down before task ", task_id, " finished")));
    }
  }
}

void TaskPool::Submit(v1::Task task, std::string required_arch, ResultCallback done) {
  const std::string task_id = task.task_id();
  // What the table already knows about this id.
  auto known = [&](const TaskStatus& status) -> std::optional<absl::StatusOr<std::string>> {
    if (status.state == TaskState::kCompleted) return absl::StatusOr<std::string>(status.result);
    if (status.state == TaskState::kFailed) {
      return absl::StatusOr<std::string>(absl::AbortedError(status.error));
    }
    return std::nullopt;
  };
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (shutdown_) {
      lock.unlock();
      done(absl::CancelledError("the worker pool is shut down"));
      return;
    }
    if (!task_id.empty()) {
      if (absl::StatusOr<TaskStatus> status = table_.Result(task_id); status.ok()) {
        if (auto finished = known(*status)) {
          lock.unlock();
          done(*std::move(finished));
          return;
        }
        waiters_[task_id].push_back(std::move(done));
        return;
      }
    }
  }
  // Not in the table: a result persisted by an earlier coordinator answers it.
  if (store_ != nullptr && !task_id.empty() && options_.result_ttl.count() > 0) {
    if (std::optional<std::string> stored = LookupOrMiss(*store_, ResultKey(task_id))) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++store_hits_total_;
      }
      done(*std::move(stored));
      return;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (shutdown_) {
    lock.unlock();
    done(absl::CancelledError("the worker pool is shut down"));
    return;
  }
  absl::StatusOr<TaskStatus> status = table_.Enqueue(std::move(task), std::move(required_arch));
  if (!status.ok()) {
    lock.unlock();
    done(status.status());
    return;
  }
  if (auto finished = known(*status)) {  // merged with a task that finished meanwhile
    lock.unlock();
    done(*std::move(finished));
    return;
  }
  waiters_[task_id].push_back(std::move(done));
  lock.unlock();
  work_.notify_all();
}

void TaskPool::SeenLocked(const std::string& worker_id, const std::vector<v1::GpuInfo>* gpus) {
  Worker& worker = workers_[worker_id];
  worker.last_seen = clock_();
  if (gpus != nullptr) worker.gpus = *gpus;
}

absl::StatusOr<std::vector<v1::Task>> TaskPool::Lease(const v1::WorkerInfo& worker, int max_tasks,
                                                      double wait_s) {
  if (max_tasks <= 0) max_tasks = std::numeric_limits<int>::max();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            Seconds(std::clamp(wait_s, 0.0, options_.max_wait_s)));
  const std::vector<v1::GpuInfo> gpus(worker.gpus().begin(), worker.gpus().end());
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shutdown_) return std::vector<v1::Task>();
    SeenLocked(worker.worker_id(), &gpus);
    absl::StatusOr<std::vector<v1::Task>> granted = table_.Lease(worker, max_tasks);
    if (!granted.ok() || !granted->empty()) return granted;
    if (std::chrono::steady_clock::now() >= deadline) return granted;
    // Woken by a queued task; the periodic wake keeps the worker "seen" while it waits.
    work_.wait_until(
        lock,
        std::min(deadline, std::chrono::steady_clock::now() +
                               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   Seconds(options_.lapse_interval_s))));
  }
}

std::vector<std::string> TaskPool::Heartbeat(const std::string& worker_id,
                                             const std::vector<std::string>& lease_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  SeenLocked(worker_id, nullptr);
  return table_.Heartbeat(worker_id, lease_ids);
}

std::chrono::seconds TaskPool::TtlFor(v1::TaskKind kind, const std::string& result) const {
  bool success = true;
  if (kind == v1::TASK_COMPILE) {
    v1::CompileResult compiled;
    success = compiled.ParseFromString(result) && compiled.status() == v1::COMPILE_OK;
  } else if (kind == v1::TASK_EVALUATE) {
    v1::EvaluationResult evaluation;
    success = evaluation.ParseFromString(result) && evaluation.verdict() == v1::PASS;
  }
  return success ? options_.result_ttl : std::min(options_.result_ttl, options_.failure_ttl);
}

bool TaskPool::Complete(const std::string& worker_id, const std::string& lease_id,
                        const std::string& task_id, std::string result) {
  std::vector<ResultCallback> callbacks;
  std::string first_result;
  bool first = false;
  v1::TaskKind kind = v1::TASK_KIND_UNSPECIFIED;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<TaskStatus> before = table_.Result(task_id);
    if (before.ok()) kind = before->kind;
    const bool was_completed = before.ok() && before->state == TaskState::kCompleted;
    if (!table_.Complete(worker_id, lease_id, task_id, std::move(result))) return false;
    SeenLocked(worker_id, nullptr);
    if (was_completed) return true;  // idempotent repeat: the first result stands
    first = true;
    absl::StatusOr<TaskStatus> after = table_.Result(task_id);
    if (after.ok()) first_result = after->result;
    auto it = waiters_.find(task_id);
    if (it != waiters_.end()) {
      callbacks = std::move(it->second);
      waiters_.erase(it);
    }
  }
  work_.notify_all();  // the worker has room again
  if (first && store_ != nullptr && options_.result_ttl.count() > 0) {
    PutOptions put;
    put.ttl = TtlFor(kind, first_result);
    if (absl::Status s = store_->Put(ResultKey(task_id), first_result, put); !s.ok()) {
      spdlog::warn("cannot persist the result of task {}: {}", task_id, std::string(s.message()));
    }
  }
  for (ResultCallback& done : callbacks) done(first_result);
  return true;
}

std::vector<std::pair<std::vector<TaskPool::ResultCallback>, absl::Status>>
TaskPool::TakeFailedLocked() {
  std::vector<std::pair<std::vector<ResultCallback>, absl::Status>> failed;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    absl::StatusOr<TaskStatus> status = table_.Result(it->first);
    absl::Status why;
    if (!status.ok()) {
      why = absl::InternalError(absl::StrCat("task ", it->first,
                                             " was forgotten by the lease table before it "
                                             "finished; raise max_finished_retained"));
    } else if (status->state == TaskState::kFailed) {
      why = absl::AbortedError(status->error);
    } else {
      ++it;
      continue;
    }
    failed.emplace_back(std::move(it->second), std::move(why));
    it = waiters_.erase(it);
  }
  return failed;
}

void TaskPool::Deliver(std::vector<std::pair<std::vector<ResultCallback>, absl::Status>> failed) {
  for (auto& [callbacks, why] : failed) {
    for (ResultCallback& done : callbacks) done(why);
  }
}

void TaskPool::LapseLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_) {
    stop_lapse_.wait_for(lock, Seconds(options_.lapse_interval_s));
    if (shutdown_) break;
    if (table_.ExpireLapsed() > 0) work_.notify_all();
    auto failed = TakeFailedLocked();
    if (failed.empty()) continue;
    lock.unlock();
    Deliver(std::move(failed));
    lock.lock();
  }
}

std::optional<v1::GpuInfo> TaskPool::WorkerGpu(const std::string& arch) const {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  // Lowest worker id first, so the answer does not depend on hash order.
  std::map<std::string, const Worker*> live;
  for (const auto& [id, worker] : workers_) {
    if (worker.last_seen + options_.leases.lease_duration_s > now) live[id] = &worker;
  }
  for (const auto& [id, worker] : live) {
    for (const v1::GpuInfo& gpu : worker->gpus) {
      if (gpu.arch() == arch) return gpu;
    }
  }
  return std::nullopt;
}

int TaskPool::LiveWorkers() const {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  int live = 0;
  for (const auto& [id, worker] : workers_) {
    if (worker.last_seen + options_.leases.lease_duration_s > now) ++live;
  }
  return live;
}

TaskPoolStats TaskPool::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TaskPoolStats stats;
  stats.table = table_.Stats();
  stats.waiting_tasks = static_cast<int64_t>(waiters_.size());
  stats.store_hits_total = store_hits_total_;
  return stats;
}

}  // namespace kforge
