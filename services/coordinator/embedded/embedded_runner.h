// EmbeddedRunner: the CandidateRunner of `kforge optimize` — everything in this process.
// Candidates are compiled on a small thread pool (the Compiler, behind the store's compile
// cache), then evaluated on the local GPUs: one GpuLane per GPU, each with one thread that
// takes the next compiled candidate from a shared queue, so a GPU runs one timed evaluation
// at a time and an idle GPU always takes the next one (least busy by construction).
// Runs never block the caller; `done` is called from the pool threads.
//
// Without lanes (no GPU) it only compiles: every outcome carries the compile result and an
// evaluation with verdict NOT_EVALUATED, so the caller can report what compiled without
// pretending anything was validated.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "services/coordinator/embedded/gpu_lane.h"
#include "services/coordinator/search/candidate_runner.h"

namespace kforge {

struct EmbeddedRunnerOptions {
  v1::CompileOptions compile;   // arch: the GPU's (the caller fills it in)
  v1::ValidationPolicy policy;  // unset: DefaultValidationPolicy()
  bool timing = true;           // false: validate only
  int compile_threads = 2;      // compiles in flight (each is a kforge-nvrtc child)
};

// Per-lane and compile counters, for the report and the tests.
struct EmbeddedRunnerStats {
  int64_t compiles = 0;
  int64_t compile_cache_hits = 0;
  int64_t compiled_ok = 0;
  std::vector<int64_t> evaluations_per_lane;
};

class EmbeddedRunner : public CandidateRunner {
 public:
  using CompileFunction =
      std::function<v1::CompileResult(const v1::Candidate&, const v1::CompileOptions&)>;
  // The captured inputs (torch.save bytes) of a target; fetched once per target and kept.
  using InputsFunction = std::function<absl::StatusOr<std::string>(const v1::Target&)>;

  // `lanes` may be empty (compile only). Threads start here.
  EmbeddedRunner(CompileFunction compile, InputsFunction inputs,
                 std::vector<std::unique_ptr<GpuLane>> lanes, EmbeddedRunnerOptions options);
  // Shutdown().
  ~EmbeddedRunner() override;
  EmbeddedRunner(const EmbeddedRunner&) = delete;
  EmbeddedRunner& operator=(const EmbeddedRunner&) = delete;

  // A compile result that failed is returned with no evaluation (COMPILE_ERROR for the
  // search). A lane that cannot evaluate at all (NOT_EVALUATED: its GPU is gone, the inputs
  // are missing) fails the run: the search stops rather than score every candidate 0.
  void Run(const v1::Target& target, const v1::Candidate& candidate, const RunOptions& options,
           Done done) override;

  // Stops taking work: what is running finishes and is delivered, what is queued is
  // delivered as CancelledError, later Runs get CancelledError at once. Joins the threads.
  void Shutdown();

  int lane_count() const { return static_cast<int>(lanes_.size()); }
  EmbeddedRunnerStats stats() const;

 private:
  struct Job {
    v1::Target target;
    v1::Candidate candidate;
    RunOptions options;
    Done done;
    RunOutcome outcome;  // the compile result, once compiled
  };

  void CompileLoop();
  void LaneLoop(size_t lane);
  void Evaluate(size_t lane, Job& job);
  absl::StatusOr<std::shared_ptr<const std::string>> InputsOf(const v1::Target& target);

  CompileFunction compile_;
  InputsFunction inputs_;
  std::vector<std::unique_ptr<GpuLane>> lanes_;
  EmbeddedRunnerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable work_;
  bool stopping_ = false;
  std::deque<std::unique_ptr<Job>> compile_queue_;
  std::deque<std::unique_ptr<Job>> eval_queue_;
  EmbeddedRunnerStats stats_;

  std::mutex inputs_mu_;  // held while fetching, so each target's inputs are read once
  std::map<std::string, std::shared_ptr<const std::string>> inputs_by_target_;

  std::vector<std::thread> threads_;
};

}  // namespace kforge
