// PullWorker: the worker side of the coordinator's pool (`kforge serve worker --coordinator`).
// It long-polls WorkerPool.Lease for tasks its GPUs can take (compile tasks only when it has
// none), runs each on an executor thread — compile through the Compiler, evaluate through the
// EvaluationPipeline (or, in CI, the test-only SimulatedEvaluator) — heartbeats the leases it
// holds while they run, and hands results back with Complete. At most max_outstanding tasks
// are held at once; the Evaluator itself runs one timed evaluation per GPU at a time.
// A coordinator that is unreachable (restarting) is retried; results are retried too, and a
// rejected (stale) result is dropped: the task went to another worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/grpc_server.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/coordinator.grpc.pb.h"
#include "kforge/v1/worker.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace kforge {

struct PullWorkerOptions {
  std::string coordinator;  // HOST:PORT of the coordinator's WorkerPool
  ClientOptions client;
  std::string worker_id;         // empty: HOSTNAME-PID
  int max_outstanding = 2;       // tasks held at once
  double lease_wait_s = 10;      // long-poll length
  double retry_backoff_s = 0.5;  // after a failed call to the coordinator
};

// What the worker does with each kind of task. `evaluate` null or `gpus` empty: the worker
// asks for compile tasks only.
struct TaskHandlers {
  std::function<v1::CompileResult(const v1::CompileRequest&)> compile;
  std::function<v1::EvaluationResult(const v1::EvaluateRequest&)> evaluate;
  std::vector<v1::GpuInfo> gpus;
};

class PullWorker {
 public:
  // `registry` (may be null) gets kforge_worker_tasks_total{kind, result}.
  PullWorker(PullWorkerOptions options, TaskHandlers handlers, prometheus::Registry* registry);
  ~PullWorker();
  PullWorker(const PullWorker&) = delete;
  PullWorker& operator=(const PullWorker&) = delete;

  // Pulls and runs tasks until Stop(); what is running then is finished and handed back.
  void Run();
  // Thread-safe; Run returns soon after.
  void Stop();

  const std::string& worker_id() const { return options_.worker_id; }

 private:
  struct Held {
    v1::Task task;
    double duration_s = 1;  // how long a lease lasts at the coordinator (a beat renews it)
  };

  void LeaseLoop();
  void ExecutorLoop();
  void HeartbeatLoop();
  void Execute(const v1::Task& task);
  // Complete with retries while the coordinator is unreachable; false when it rejected it.
  bool Hand(const v1::Task& task, const std::string& result);
  v1::WorkerInfo Info();
  void Count(const std::string& kind, const std::string& result);

  PullWorkerOptions options_;
  TaskHandlers handlers_;
  std::unique_ptr<v1::WorkerPool::Stub> stub_;
  prometheus::Family<prometheus::Counter>* tasks_ = nullptr;

  std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::deque<std::string> queue_;     // lease ids, in lease order
  std::map<std::string, Held> held_;  // lease id -> task
  int running_ = 0;
  grpc::ClientContext* lease_call_ = nullptr;  // the long-poll in flight, to cancel on Stop
};

}  // namespace kforge
