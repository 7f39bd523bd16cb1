// SimulatedPoolWorkers: in-process worker threads that lease tasks from a TaskPool and answer
// them with the test-only SimulatedEvaluator (every compile succeeds). They let the coordinator
// tests and benchmarks run a TaskPool without worker processes or a GPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "services/coordinator/pool/task_pool.h"
#include "services/worker/simulated_evaluator.h"

namespace kforge {

class SimulatedPoolWorkers {
 public:
  // `count` workers of `arch` named "<name_prefix><index>", each with one task at a time,
  // spending `evaluation_s` per evaluation and waiting up to `lease_wait_s` per lease.
  SimulatedPoolWorkers(TaskPool& pool, int count, const std::string& arch, double evaluation_s,
                       const std::string& name_prefix, double lease_wait_s);
  ~SimulatedPoolWorkers();  // stops and joins the threads

  int64_t evaluations() const { return evaluations_.load(); }

 private:
  void Run(TaskPool& pool, const std::string& worker_id, double evaluation_s,
           double lease_wait_s);

  SimulatedEvaluator simulated_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> evaluations_{0};
  std::vector<std::thread> threads_;
};

}  // namespace kforge
