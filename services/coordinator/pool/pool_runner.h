// PoolCandidateRunner: the CandidateRunner of the distributed coordinator. A run becomes two
// tasks in the TaskPool — compile (any worker, GPU or not) and, when that compiled, evaluate
// (only a worker with a GPU of the job's arch, which finds the compile in the shared cache) —
// and completes when the evaluation's result comes back. The SearchDriver runs over it
// unchanged. Task ids are content hashes of the requests, so the same candidate evaluated
// twice (another job, a resumed one) merges with the first.
#pragma once

#include <atomic>
#include <cstdint>

#include "kforge/v1/common.pb.h"
#include "kforge/v1/worker.pb.h"
#include "services/coordinator/pool/task_pool.h"
#include "services/coordinator/search/candidate_runner.h"

namespace kforge {

struct PoolRunnerOptions {
  v1::CompileOptions compile;   // arch: the job's GPU arch
  v1::ValidationPolicy policy;  // the job's
  bool timing = true;           // false: validate only
};

class PoolCandidateRunner : public CandidateRunner {
 public:
  // `pool` must outlive the runner and every callback it has not delivered yet.
  PoolCandidateRunner(TaskPool& pool, PoolRunnerOptions options);

  // Never blocks on a worker. A task that failed at the pool's retry cap is the candidate's
  // failure (COMPILE_RESOURCE_LIMIT or CRASH with the reason); a pool that shut down is the
  // runner's (Cancelled).
  void Run(const v1::Target& target, const v1::Candidate& candidate, const RunOptions& options,
           Done done) override;

  // Runs submitted and not yet done.
  int64_t in_flight() const { return in_flight_->load(); }

  static v1::CompileRequest CompileRequestFor(const v1::Candidate& candidate,
                                              const v1::CompileOptions& options);

 private:
  TaskPool& pool_;
  PoolRunnerOptions options_;
  std::shared_ptr<std::atomic<int64_t>> in_flight_;
};

}  // namespace kforge
