// JobManager: the coordinator's jobs — what JobService serves. A submitted job is captured
// (through a CaptureService), its targets selected (top-K by share that the proposer can work
// on, or an explicit list), and searched by a SearchDriver over a PoolCandidateRunner, so the
// evaluations run on the pool's workers. Each job runs on its own thread.
//
// Persistence (the same mechanism as `kforge optimize --resume`: the driver's checkpoints and
// ResumeTarget), all in the Store:
//   job/<id>                   the Job (spec, state, targets with progress), on every change
//   tree/<id>/<target id>      each target's SearchTreeState, on every dispatch and backup
//   capture/<sha256>           the OperatorProfile of a capture request, so a job resumed
//                              mid-capture or a second job of the same model reuses it
//   task/<task id>             task results (TaskPool)
// Start() loads every job and resumes the unfinished ones: a tree keeps every node it had,
// its pending nodes are re-run first, and the search continues as it would have. (A job's
// wall-time budget, the one input that is not reproducible, starts again on resume.)
//
// Capture goes through a CaptureService (the coordinator links no LibTorch); its profile is
// cached in the store. A job whose GPU arch no worker has waits and says so in its message
// and events; its tasks stay queued until such a worker connects.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/store.h"
#include "kforge/v1/capture.pb.h"
#include "kforge/v1/coordinator.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "services/coordinator/pool/task_pool.h"
#include "services/proposer/proposer.h"

namespace kforge {

class SearchDriver;

struct JobManagerOptions {
  std::string default_arch = "sm_90";  // JobSpec.arch when it is empty
  int max_in_flight = 16;              // evaluations outstanding per job
  int max_in_flight_per_target = 4;
  int default_top_k = 5;  // JobSpec.top_k 0 without explicit targets
  // Bounds that turn a typo into an error instead of a search that never ends.
  int max_iterations_per_target = 100000;
  double max_time_budget_s = 30 * 24 * 3600.0;
  int max_top_k = 64;
  // Targets captured beside top_k: uncovered ones ranked above the synthesizer's (its report's
  // skipped list), or, for an LLM, more to search.
  int captured_extra_targets = 10;
  double monitor_interval_s = 0.5;  // metrics refresh and the "no worker" check
  size_t max_events_kept = 5000;    // per job, for Watch
};

// Captures a model: the CaptureService client in the server, a function in tests and benches.
using CaptureFunction =
    std::function<absl::StatusOr<v1::OperatorProfile>(const v1::CaptureRequest&)>;

// Events of one job from an index on (see WaitEvents).
struct JobEvents {
  std::vector<v1::JobEvent> events;
  size_t next = 0;        // pass as `from` next time
  bool finished = false;  // the job is DONE, FAILED or CANCELLED and every event was returned
};

class JobManager {
 public:
  // Everything passed must outlive the manager. `capture` may be null: jobs then fail at
  // capture saying how to configure one. `registry` may be null (no metrics).
  JobManager(Store& store, TaskPool& pool, Proposer& proposer, CaptureFunction capture,
             JobManagerOptions options, prometheus::Registry* registry);
  ~JobManager();  // Shutdown()
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Loads every job in the store and resumes the unfinished ones. Call once, before serving.
  absl::Status Start();
  // Stops every job where it is (their state stays resumable) and joins the threads.
  void Shutdown();

  // Validates `spec` (InvalidArgument / NotFound naming the field and what to do), stores the
  // job and starts it. Returns its id.
  absl::StatusOr<std::string> Submit(v1::JobSpec spec);
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  std::vector<v1::Job> List() const;  // newest first
  // FailedPrecondition for a job that already ended.
  absl::Status Cancel(const std::string& job_id);
  // The tree of one target (`target_id` may be empty when the job has one target).
  absl::StatusOr<std::vector<v1::SearchNode>> GetTree(const std::string& job_id,
                                                      const std::string& target_id) const;
  // The candidate with its compile result and evaluation, from any job's tree.
  absl::StatusOr<v1::EvaluatedCandidate> GetCandidate(const std::string& candidate_id) const;
  // Events of `job_id` with index >= `from`, waiting up to `timeout_s` for one to arrive.
  absl::StatusOr<JobEvents> WaitEvents(const std::string& job_id, size_t from,
                                       double timeout_s) const;

 private:
  struct Record;
  struct Metrics;

  void RunJob(Record* record);
  absl::Status RunSteps(Record* record);
  absl::Status CaptureAndSelect(Record* record);
  absl::Status WaitForWorker(Record* record);
  absl::Status Search(Record* record);
  absl::StatusOr<v1::OperatorProfile> CaptureCached(const v1::CaptureRequest& request);

  // Under mu_: sets the state and message, stamps the time, adds an event.
  void UpdateLocked(Record* record, v1::JobState state, const std::string& message,
                    const std::string& kind);
  void EmitLocked(Record* record, const std::string& kind, const std::string& message);
  // Writes the job record (a copy taken under mu_) to the store.
  absl::Status Persist(Record* record);
  bool StopRequested(const Record* record) const;
  absl::StatusOr<std::string> TreeBytes(const std::string& job_id,
                                        const std::string& target_id) const;
  void MonitorLoop();
  void StartThreadLocked(Record* record);

  Store& store_;
  TaskPool& pool_;
  Proposer& proposer_;
  CaptureFunction capture_;
  const JobManagerOptions options_;
  std::unique_ptr<Metrics> metrics_;

  mutable std::mutex mu_;  // guards the records and everything below
  mutable std::condition_variable changed_;
  std::map<std::string, std::unique_ptr<Record>> jobs_;
  bool shutdown_ = false;
  std::thread monitor_;
};

// The arch a job runs on and the validation policy it uses, filled in.
std::string JobArch(const v1::JobSpec& spec, const std::string& default_arch);
// "done", "searching", ...
std::string JobStateName(v1::JobState state);

}  // namespace kforge
