// SimulatedPoolWorkers (see simulated_pool_workers.h).
#include "services/coordinator/pool/simulated_pool_workers.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace kforge {

SimulatedPoolWorkers::SimulatedPoolWorkers(TaskPool& pool, int count, const std::string& arch,
                                           double evaluation_s, const std::string& name_prefix,
                                           double lease_wait_s)
    : simulated_(arch) {
  for (int w = 0; w < count; ++w) {
    threads_.emplace_back([this, &pool, id = absl::StrCat(name_prefix, w), evaluation_s,
                           lease_wait_s] { Run(pool, id, evaluation_s, lease_wait_s); });
  }
}

SimulatedPoolWorkers::~SimulatedPoolWorkers() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
}

void SimulatedPoolWorkers::Run(TaskPool& pool, const std::string& worker_id,
                               double evaluation_s, double lease_wait_s) {
  v1::WorkerInfo info;
  info.set_worker_id(worker_id);
  *info.add_gpus() = simulated_.Gpu();
  info.set_max_outstanding(1);
  while (!stop_.load()) {
    absl::StatusOr<std::vector<v1::Task>> tasks = pool.Lease(info, 1, lease_wait_s);
    if (!tasks.ok()) return;
    for (const v1::Task& task : *tasks) {
      std::string result;
      if (task.kind() == v1::TASK_COMPILE) {
        v1::CompileResult compiled;
        compiled.set_status(v1::COMPILE_OK);
        result = compiled.SerializeAsString();
      } else {
        v1::EvaluateRequest request;
        request.ParseFromString(task.request());
        if (evaluation_s > 0) {
          std::this_thread::sleep_for(std::chrono::duration<double>(evaluation_s));
        }
        result = simulated_.Evaluate(request, v1::CompileResult()).SerializeAsString();
        evaluations_.fetch_add(1);
      }
      pool.Complete(info.worker_id(), task.lease_id(), task.task_id(), std::move(result));
    }
  }
}

}  // namespace kforge
