// LeaseTable: queue, leases, lapses and results of the coordinator's worker pool.
#include "services/coordinator/pool/lease_table.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

std::string RandomLeasePrefix() {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return absl::StrCat(absl::Hex(bits, absl::kZeroPad16));
}

}  // namespace

const char* TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kQueued:
      return "queued";
    case TaskState::kLeased:
      return "leased";
    case TaskState::kCompleted:
      return "completed";
    case TaskState::kFailed:
      return "failed";
  }
  return "unknown";
}

double LeaseTable::SystemClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

LeaseTable::LeaseTable(LeaseTableOptions options, Clock clock)
    : options_(options), clock_(std::move(clock)), lease_prefix_(RandomLeasePrefix()) {}

TaskStatus LeaseTable::StatusOf(const std::string& task_id, const TaskEntry& entry) {
  TaskStatus status;
  status.task_id = task_id;
  status.kind = entry.task.kind();
  status.state = entry.state;
  status.attempts = entry.attempts;
  status.result = entry.result;
  status.error = entry.error;
  return status;
}

bool LeaseTable::Eligible(const TaskEntry& task, const v1::WorkerInfo& worker) {
  if (task.task.kind() == v1::TASK_COMPILE) return true;
  return std::any_of(worker.gpus().begin(), worker.gpus().end(),
                     [&](const v1::GpuInfo& gpu) { return gpu.arch() == task.required_arch; });
}

absl::StatusOr<TaskStatus> LeaseTable::Enqueue(v1::Task task, std::string required_arch) {
  if (task.task_id().empty()) {
    return absl::InvalidArgumentError(
        "Enqueue: task has an empty task_id; set it to the content hash of its request");
  }
  if (task.kind() != v1::TASK_COMPILE && task.kind() != v1::TASK_EVALUATE) {
    return absl::InvalidArgumentError(absl::StrCat("Enqueue: task ", task.task_id(), " has kind ",
                                                   v1::TaskKind_Name(task.kind()),
                                                   "; set it to TASK_COMPILE or TASK_EVALUATE"));
  }
  if (task.kind() == v1::TASK_EVALUATE && required_arch.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Enqueue: evaluate task ", task.task_id(),
        " has no required arch; pass the GPU arch it must be timed on (e.g. \"sm_90\")"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLapsedLocked(clock_());
  const std::string task_id = task.task_id();
  auto found = tasks_.find(task_id);
  if (found != tasks_.end()) {
    ++merged_enqueues_total_;
    TaskStatus status = StatusOf(task_id, found->second);
    status.merged = true;
    return status;
  }
  // Lease fields belong to the table, not the caller.
  task.clear_lease_id();
  task.clear_lease_expiry_unix_s();
  task.clear_attempt();
  TaskEntry entry;
  entry.task = std::move(task);
  entry.required_arch = std::move(required_arch);
  entry.sequence = next_sequence_++;
  TaskStatus status = StatusOf(task_id, entry);
  tasks_.emplace(task_id, std::move(entry));
  queue_.push_back(task_id);
  return status;
}

absl::StatusOr<std::vector<v1::Task>> LeaseTable::Lease(const v1::WorkerInfo& worker,
                                                        int max_tasks) {
  if (worker.worker_id().empty()) {
    return absl::InvalidArgumentError(
        "Lease: WorkerInfo has an empty worker_id; give each worker a stable unique id");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  ExpireLapsedLocked(now);
  WorkerEntry& record = workers_[worker.worker_id()];
  record.reported_state = worker.state();
  record.last_seen_unix_s = now;

  std::vector<v1::Task> granted;
  if (worker.state() == v1::WORKER_DRAINING) return granted;
  const int cap =
      worker.max_outstanding() > 0 ? worker.max_outstanding() : options_.default_max_outstanding;
  const int room = std::min(max_tasks, cap - static_cast<int>(record.lease_ids.size()));
  for (auto it = queue_.begin(); it != queue_.end() && static_cast<int>(granted.size()) < room;) {
    TaskEntry& entry = tasks_.at(*it);
    if (!Eligible(entry, worker)) {
      ++it;
      continue;
    }
    const std::string lease_id = absl::StrCat(lease_prefix_, "-", next_lease_++);
    const double expiry = now + options_.lease_duration_s;
    entry.state = TaskState::kLeased;
    entry.attempts += 1;
    entry.lease_id = lease_id;
    leases_[lease_id] = LeaseEntry{*it, worker.worker_id(), expiry};
    record.lease_ids.insert(lease_id);

    v1::Task task = entry.task;
    task.set_lease_id(lease_id);
    task.set_lease_expiry_unix_s(expiry);
    task.set_attempt(entry.attempts);
    granted.push_back(std::move(task));
    it = queue_.erase(it);
  }
  return granted;
}

std::vector<std::string> LeaseTable::Heartbeat(const std::string& worker_id,
                                               const std::vector<std::string>& lease_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  ExpireLapsedLocked(now);
  auto worker = workers_.find(worker_id);
  if (worker != workers_.end()) worker->second.last_seen_unix_s = now;
  std::vector<std::string> drop;
  for (const std::string& lease_id : lease_ids) {
    auto lease = leases_.find(lease_id);
    if (lease == leases_.end() || lease->second.worker_id != worker_id) {
      drop.push_back(lease_id);
      continue;
    }
    lease->second.expiry_unix_s = now + options_.lease_duration_s;
  }
  return drop;
}

bool LeaseTable::Complete(const std::string& worker_id, const std::string& lease_id,
                          const std::string& task_id, std::string result) {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  ExpireLapsedLocked(now);
  auto task = tasks_.find(task_id);
  if (task == tasks_.end()) return false;
  // The same content hash gives the same result: a repeat is accepted and changes nothing.
  if (task->second.state == TaskState::kCompleted) return true;
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end() || lease->second.worker_id != worker_id ||
      lease->second.task_id != task_id) {
    return false;
  }
  auto worker = workers_.find(worker_id);
  if (worker != workers_.end()) worker->second.last_seen_unix_s = now;
  ReleaseLeaseLocked(lease_id);
  task->second.state = TaskState::kCompleted;
  task->second.result = std::move(result);
  task->second.lease_id.clear();
  FinishLocked(task_id);
  return true;
}

int LeaseTable::ExpireLapsed() {
  std::lock_guard<std::mutex> lock(mu_);
  return ExpireLapsedLocked(clock_());
}

int LeaseTable::ExpireLapsedLocked(double now) {
  std::vector<std::string> lapsed;
  for (const auto& [lease_id, lease] : leases_) {
    if (lease.expiry_unix_s <= now) lapsed.push_back(lease_id);
  }
  std::vector<std::string> task_ids;
  for (const std::string& lease_id : lapsed) {
    task_ids.push_back(leases_.at(lease_id).task_id);
    ReleaseLeaseLocked(lease_id);
  }
  // Re-queue at the front, oldest enqueued first, so a lapse does not reorder the queue.
  std::sort(task_ids.begin(), task_ids.end(), [&](const std::string& a, const std::string& b) {
    return tasks_.at(a).sequence > tasks_.at(b).sequence;
  });
  for (const std::string& task_id : task_ids) {
    TaskEntry& entry = tasks_.at(task_id);
    entry.lease_id.clear();
    if (entry.attempts >= options_.max_attempts) {
      entry.state = TaskState::kFailed;
      entry.error = absl::StrCat("lease lapsed ", entry.attempts,
                                 " times; the candidate is marked failed so a poisonous kernel "
                                 "cannot crash-loop the pool");
      FinishLocked(task_id);
    } else {
      entry.state = TaskState::kQueued;
      queue_.push_front(task_id);
    }
  }
  lease_expiries_total_ += static_cast<int64_t>(lapsed.size());

  // A worker that holds nothing and has been silent for a lease duration is gone.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.lease_ids.empty() &&
        it->second.last_seen_unix_s + options_.lease_duration_s <= now) {
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  return static_cast<int>(lapsed.size());
}

void LeaseTable::ReleaseLeaseLocked(const std::string& lease_id) {
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) return;
  auto worker = workers_.find(lease->second.worker_id);
  if (worker != workers_.end()) worker->second.lease_ids.erase(lease_id);
  leases_.erase(lease);
}

void LeaseTable::FinishLocked(const std::string& task_id) {
  finished_.push_back(task_id);
  while (finished_.size() > options_.max_finished_retained) {
    tasks_.erase(finished_.front());
    finished_.pop_front();
  }
}

absl::StatusOr<TaskStatus> LeaseTable::Result(const std::string& task_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = tasks_.find(task_id);
  if (found == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("Result: task ", task_id,
                                            " is not in the lease table; enqueue it first (or "
                                            "it finished long ago and was forgotten)"));
  }
  return StatusOf(task_id, found->second);
}

LeaseTableStats LeaseTable::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  LeaseTableStats stats;
  stats.queued = static_cast<int64_t>(queue_.size());
  stats.leased = static_cast<int64_t>(leases_.size());
  for (const auto& [task_id, entry] : tasks_) {
    if (entry.state == TaskState::kCompleted) ++stats.completed;
    if (entry.state == TaskState::kFailed) ++stats.failed;
  }
  for (const auto& [worker_id, worker] : workers_) {
    v1::WorkerState state = worker.reported_state;
    // Busy or idle is what the table sees; draining is only what the worker says.
    if (state != v1::WORKER_DRAINING) {
      state = worker.lease_ids.empty() ? v1::WORKER_IDLE : v1::WORKER_BUSY;
    }
    ++stats.workers_by_state[state];
  }
  stats.lease_expiries_total = lease_expiries_total_;
  stats.merged_enqueues_total = merged_enqueues_total_;
  return stats;
}

}  // namespace kforge
