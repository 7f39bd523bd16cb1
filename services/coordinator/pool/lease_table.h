// LeaseTable: the coordinator's worker-pool bookkeeping — the task queue, the leases workers
// hold on tasks, their expiry and retry cap, and the results (DESIGN.md, "Distribution").
//
// Pure logic: no RPC, no threads of its own. The WorkerPool gRPC service adapts its calls to
// these methods. Time comes from an injected clock so tests drive lapses deterministically.
// Thread-safe: every method takes one mutex.
//
// Life of a task: Enqueue -> queued -> Lease -> leased -> Complete -> completed.
// A lease that is not heartbeated past its expiry lapses: the task goes back to the front of
// the queue, or, once it has been leased max_attempts times, is marked failed so a poisonous
// kernel cannot crash-loop the pool. Task ids are content hashes, so enqueuing an id the table
// already holds merges with it and results are idempotent.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/coordinator.pb.h"

namespace kforge {

struct LeaseTableOptions {
  double lease_duration_s = 30.0;   // a heartbeat extends a lease by this much
  int max_attempts = 3;             // leases a task may lapse before it is marked failed
  int default_max_outstanding = 2;  // per worker, when WorkerInfo.max_outstanding is 0
  // Completed and failed tasks kept for merging and Result(); the oldest are forgotten first
  // (the store's caches are the durable record).
  size_t max_finished_retained = 100000;
};

enum class TaskState { kQueued, kLeased, kCompleted, kFailed };
const char* TaskStateName(TaskState state);

// What the table knows of one task.
struct TaskStatus {
  std::string task_id;
  v1::TaskKind kind = v1::TASK_KIND_UNSPECIFIED;
  TaskState state = TaskState::kQueued;
  int attempts = 0;     // times the task has been leased
  std::string result;   // kCompleted: the serialized result the worker sent
  std::string error;    // kFailed: why
  bool merged = false;  // Enqueue only: the id was already held, nothing new was queued
};

struct LeaseTableStats {
  int64_t queued = 0;
  int64_t leased = 0;  // leases held (past-expiry ones count until the next lapse pass)
  int64_t completed = 0;
  int64_t failed = 0;
  std::map<v1::WorkerState, int64_t> workers_by_state;  // workers heard from recently
  int64_t lease_expiries_total = 0;
  int64_t merged_enqueues_total = 0;
};

class LeaseTable {
 public:
  using Clock = std::function<double()>;  // unix seconds
  static double SystemClock();

  explicit LeaseTable(LeaseTableOptions options = {}, Clock clock = &LeaseTable::SystemClock);

  // Queues `task` (its lease fields are ignored). TASK_COMPILE may go to any worker;
  // TASK_EVALUATE only to a worker with a GPU of `required_arch` ("sm_90"). An id the table
  // already holds (queued, leased, completed or failed) merges: nothing is queued and the
  // existing status is returned with merged = true. InvalidArgument for an empty id, an
  // unspecified kind, or an evaluate task without an arch.
  absl::StatusOr<TaskStatus> Enqueue(v1::Task task, std::string required_arch);

  // Up to min(max_tasks, cap - outstanding) eligible tasks for `worker`, oldest first, each
  // with a fresh lease_id, lease_expiry_unix_s = now + lease duration and attempt counted
  // from 1. cap is worker.max_outstanding, or the default when it is 0. A draining worker
  // gets nothing. InvalidArgument when the worker has no id.
  absl::StatusOr<std::vector<v1::Task>> Lease(const v1::WorkerInfo& worker, int max_tasks);

  // Extends the listed leases that `worker_id` holds; returns the ids it must drop: lapsed,
  // completed, unknown or held by another worker.
  std::vector<std::string> Heartbeat(const std::string& worker_id,
                                     const std::vector<std::string>& lease_ids);

  // Records `result` for `task_id`. Accepted when `worker_id` holds live lease `lease_id` on
  // that task, or (idempotently, keeping the first result) when the task already completed.
  // Rejected otherwise: a completion that arrives after its lease lapsed is stale.
  bool Complete(const std::string& worker_id, const std::string& lease_id,
                const std::string& task_id, std::string result);

  // Lapses every lease past its expiry: re-queues its task at the front, or marks it failed
  // at the retry cap. Returns how many leases lapsed. The other methods do this first, so
  // calling it is only needed to act on lapses while no worker calls in.
  int ExpireLapsed();

  // NotFound for an id the table does not hold (never enqueued, or forgotten).
  absl::StatusOr<TaskStatus> Result(const std::string& task_id) const;

  LeaseTableStats Stats() const;

 private:
  struct TaskEntry {
    v1::Task task;
    std::string required_arch;
    TaskState state = TaskState::kQueued;
    int attempts = 0;
    uint64_t sequence = 0;  // enqueue order, to keep re-queued tasks in FIFO order
    std::string lease_id;   // while leased
    std::string result;
    std::string error;
  };
  struct LeaseEntry {
    std::string task_id;
    std::string worker_id;
    double expiry_unix_s = 0;
  };
  struct WorkerEntry {
    v1::WorkerState reported_state = v1::WORKER_STATE_UNSPECIFIED;
    std::set<std::string> lease_ids;
    double last_seen_unix_s = 0;
  };

  // The *Locked helpers expect mu_ held.
  int ExpireLapsedLocked(double now);
  void FinishLocked(const std::string& task_id);
  void ReleaseLeaseLocked(const std::string& lease_id);
  static bool Eligible(const TaskEntry& task, const v1::WorkerInfo& worker);
  static TaskStatus StatusOf(const std::string& task_id, const TaskEntry& entry);

  const LeaseTableOptions options_;
  const Clock clock_;
  const std::string lease_prefix_;  // random per table: a restarted coordinator never reuses ids

  // std::mutex rather than absl::Mutex: the distro's abseil is not built for ThreadSanitizer.
  mutable std::mutex mu_;  // guards everything below
  std::unordered_map<std::string, TaskEntry> tasks_;
  std::deque<std::string> queue_;     // task ids, next to lease first
  std::deque<std::string> finished_;  // task ids, oldest first
  std::unordered_map<std::string, LeaseEntry> leases_;
  std::unordered_map<std::string, WorkerEntry> workers_;
  uint64_t next_sequence_ = 0;
  uint64_t next_lease_ = 0;
  int64_t lease_expiries_total_ = 0;
  int64_t merged_enqueues_total_ = 0;
};

}  // namespace kforge
