// TaskPool: the coordinator's side of the worker pool — the LeaseTable plus what a live pool
// needs around it: callbacks for whoever waits on a task, long-poll leasing, a background
// lapse pass (leases of silent workers re-queue, or fail at the retry cap, even while no
// worker calls in), the GPUs of the workers heard from, and task results persisted in the
// store so a restarted coordinator does not redo work that finished before it died.
//
// Task ids are content hashes (TaskId): a task submitted while the same id is queued, leased
// or finished merges with it, and every waiter gets the one result. The WorkerPool gRPC
// service (worker_pool_service.h) and the PoolCandidateRunner (pool_runner.h) sit on top.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "google/protobuf/message.h"
#include "kforge/v1/coordinator.pb.h"
#include "services/coordinator/pool/lease_table.h"

namespace kforge {

// The id of a task: sha256 (common/digest.h MakeDigest) over its kind and the deterministic
// bytes of its request, so the same work always has the same id.
std::string TaskId(v1::TaskKind kind, const google::protobuf::Message& request);
// Protobuf bytes with deterministic map order: the input of content hashes.
std::string DeterministicBytes(const google::protobuf::Message& message);

struct TaskPoolOptions {
  LeaseTableOptions leases;
  double lapse_interval_s = 0.5;  // how often the background pass looks for lapsed leases
  double max_wait_s = 60;         // cap on one Lease long-poll
  // Completed results kept in the store under "task/<id>"; 0 keeps none there. Failures (a
  // compile that did not succeed, a verdict other than PASS) may be transient (a timeout
  // under load), so they are kept only briefly, like the workers' caches do.
  std::chrono::seconds result_ttl{7 * 24 * 3600};
  std::chrono::seconds failure_ttl{600};
};

struct TaskPoolStats {
  LeaseTableStats table;
  int64_t waiting_tasks = 0;     // tasks someone waits on (submitted, not finished)
  int64_t store_hits_total = 0;  // submissions answered from results persisted in the store
};

class TaskPool {
 public:
  // The serialized result, or an error: Aborted when the task failed at the retry cap (the
  // message says why), Cancelled when the pool shut down first.
  using ResultCallback = std::function<void(absl::StatusOr<std::string>)>;

  // `store` may be null (no persisted results); it must outlive the pool. Starts the lapse
  // thread.
  explicit TaskPool(TaskPoolOptions options = {}, Store* store = nullptr,
                    LeaseTable::Clock clock = &LeaseTable::SystemClock);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Queues `task` for a worker (evaluate tasks only for one with a GPU of `required_arch`)
  // unless its result is already known (in the table or the store), and calls `done` once
  // with the result, from whichever thread finishes it (possibly this one, before Submit
  // returns). Invalid tasks (see LeaseTable::Enqueue) get their error through `done`.
  void Submit(v1::Task task, std::string required_arch, ResultCallback done);

  // Long-poll: waits up to min(wait_s, max_wait_s) until tasks `worker` may take are queued,
  // then leases up to `max_tasks` (0: as many as its cap allows). Returns empty on timeout
  // or shutdown.
  absl::StatusOr<std::vector<v1::Task>> Lease(const v1::WorkerInfo& worker, int max_tasks,
                                              double wait_s);
  std::vector<std::string> Heartbeat(const std::string& worker_id,
                                     const std::vector<std::string>& lease_ids);
  // Records a result (see LeaseTable::Complete); the first accepted one goes to the waiters
  // and to the store.
  bool Complete(const std::string& worker_id, const std::string& lease_id,
                const std::string& task_id, std::string result);

  // A GPU of `arch` reported by a worker heard from within a lease duration, if any.
  std::optional<v1::GpuInfo> WorkerGpu(const std::string& arch) const;
  // Workers heard from within a lease duration.
  int LiveWorkers() const;

  TaskPoolStats Stats() const;
  const TaskPoolOptions& options() const { return options_; }

  // Wakes every long-poll, fails every waiter with Cancelled and stops the lapse thread.
  // Idempotent; Submit afterwards fails at once.
  void Shutdown();

 private:
  struct Worker {
    std::vector<v1::GpuInfo> gpus;
    double last_seen = 0;
  };

  void LapseLoop();
  // Waiters of tasks that failed in the table (retry cap) are taken out for their callbacks.
  std::vector<std::pair<std::vector<ResultCallback>, absl::Status>> TakeFailedLocked();
  void Deliver(std::vector<std::pair<std::vector<ResultCallback>, absl::Status>> failed);
  void SeenLocked(const std::string& worker_id, const std::vector<v1::GpuInfo>* gpus);
  // How long the result of a task of `kind` is kept in the store.
  std::chrono::seconds TtlFor(v1::TaskKind kind, const std::string& result) const;

  const TaskPoolOptions options_;
  Store* const store_;
  const LeaseTable::Clock clock_;
  LeaseTable table_;

  mutable std::mutex mu_;         // guards what follows; taken before the table's own lock
  std::condition_variable work_;  // a task was queued or re-queued, or shutdown
  std::condition_variable stop_lapse_;
  bool shutdown_ = false;
  std::unordered_map<std::string, std::vector<ResultCallback>> waiters_;
  std::unordered_map<std::string, Worker> workers_;
  int64_t store_hits_total_ = 0;
  std::thread lapse_thread_;
};

}  // namespace kforge
