// JobManager: jobs, their threads, persistence and events (see job_manager.h).
#include "services/coordinator/service/job_manager.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <regex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/status.h"
#include "common/tensor_signature.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/coordinator/pool/pool_runner.h"
#include "services/coordinator/search/search_driver.h"
#include "services/coordinator/search/search_tree.h"
#include "services/worker/evaluator.h"
#include "spdlog/spdlog.h"

namespace kforge {

struct JobManager::Record {
  v1::Job job;
  std::vector<v1::JobEvent> events;
  size_t first_event = 0;                    // index of events[0] (older ones were dropped)
  std::map<std::string, std::string> trees;  // target id -> latest checkpoint bytes
  bool cancel_requested = false;
  bool waiting_for_worker = false;  // the monitor's last "no worker" finding
  bool search_started = false;
  SearchDriver* driver = nullptr;  // while searching
  std::thread thread;
};

struct JobManager::Metrics {
  explicit Metrics(prometheus::Registry& registry)
      : iterations(prometheus::BuildCounter()
                       .Name("kforge_search_iterations_total")
                       .Help("Candidate evaluations backed up into a search tree")
                       .Register(registry)
                       .Add({})),
        in_flight(prometheus::BuildGauge()
                      .Name("kforge_evaluations_in_flight")
                      .Help("Candidates submitted to the worker pool and not yet finished")
                      .Register(registry)
                      .Add({})),
        queue_depth(prometheus::BuildGauge()
                        .Name("kforge_pool_queue_depth")
                        .Help("Tasks queued for a worker")
                        .Register(registry)
                        .Add({})),
        leased(prometheus::BuildGauge()
                   .Name("kforge_pool_leases")
                   .Help("Tasks leased to a worker")
                   .Register(registry)
                   .Add({})),
        workers(prometheus::BuildGauge()
                    .Name("kforge_pool_workers")
                    .Help("Workers heard from recently, by state")
                    .Register(registry)),
        lease_expiries(prometheus::BuildCounter()
                           .Name("kforge_pool_lease_expiries_total")
                           .Help("Leases that lapsed without a heartbeat (their task re-queued, "
                                 "or failed at the retry cap)")
                           .Register(registry)
                           .Add({})),
        tasks_failed(prometheus::BuildGauge()
                         .Name("kforge_pool_failed_tasks")
                         .Help("Tasks the pool marked failed at the retry cap (retained)")
                         .Register(registry)
                         .Add({})),
        jobs(prometheus::BuildGauge()
                 .Name("kforge_jobs")
                 .Help("Jobs known to the coordinator, by state")
                 .Register(registry)),
        best_speedup(prometheus::BuildGauge()
                         .Name("kforge_job_best_speedup")
                         .Help("Best speedup over eager found so far, per job (the best target)")
                         .Register(registry)) {}

  prometheus::Counter& iterations;
  prometheus::Gauge& in_flight;
  prometheus::Gauge& queue_depth;
  prometheus::Gauge& leased;
  prometheus::Family<prometheus::Gauge>& workers;
  prometheus::Counter& lease_expiries;
  prometheus::Gauge& tasks_failed;
  prometheus::Family<prometheus::Gauge>& jobs;
  prometheus::Family<prometheus::Gauge>& best_speedup;
  int64_t expiries_seen = 0;
};

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string JobKey(const std::string& id) { return absl::StrCat("job/", id); }
std::string TreeKey(const std::string& job, const std::string& target) {
  return absl::StrCat("tree/", job, "/", target);
}

std::string NewJobId() {
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return absl::StrCat("job-", absl::Hex(bits, absl::kZeroPad16));
}

bool Terminal(v1::JobState state) {
  return state == v1::JOB_DONE || state == v1::JOB_FAILED || state == v1::JOB_CANCELLED;
}

bool IsLlmProposer(const std::string& name) { return name == "openai" || name == "anthropic"; }

std::string Describe(const v1::Target& target) {
  return absl::StrFormat("%s %s (%.1f%%)", TargetOpName(target), TargetSignature(target),
                         target.share() * 100);
}

absl::Status CheckArtifact(Store& store, const char* field, const v1::Digest& digest) {
  if (digest.sha256().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("JobSpec.", field,
                     " is empty; upload the file first (kforge submit does it) and pass "
                     "its digest"));
  }
  absl::StatusOr<std::optional<std::string>> manifest =
      store.Get(absl::StrCat("blob/", digest.sha256()));
  if (!manifest.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot check JobSpec.", field, " in store ",
                                               store.Describe(), ": ",
                                               manifest.status().message()));
  }
  if (!manifest->has_value()) {
    return absl::NotFoundError(absl::StrCat("JobSpec.", field, " names artifact ", digest.sha256(),
                                            ", which is not in store ", store.Describe(),
                                            "; upload it first (JobService.Upload)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string JobArch(const v1::JobSpec& spec, const std::string& default_arch) {
  return spec.arch().empty() ? default_arch : spec.arch();
}

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_QUEUED:
      return "queued";
    case v1::JOB_CAPTURING:
      return "capturing";
    case v1::JOB_SEARCHING:
      return "searching";
    case v1::JOB_DONE:
      return "done";
    case v1::JOB_FAILED:
      return "failed";
    case v1::JOB_CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

JobManager::JobManager(Store& store, TaskPool& pool, Proposer& proposer, CaptureFunction capture,
                       JobManagerOptions options, prometheus::Registry* registry)
    : store_(store),
      pool_(pool),
      proposer_(proposer),
      capture_(std::move(capture)),
      options_(std::move(options)) {
  if (registry != nullptr) metrics_ = std::make_unique<Metrics>(*registry);
}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Start() {
  KF_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_.List("job/"));
  std::sort(keys.begin(), keys.end());
  absl::StatusOr<std::vector<std::optional<std::string>>> values = store_.GetMany(keys);
  if (!values.ok()) return values.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!(*values)[i]) continue;
    auto record = std::make_unique<Record>();
    if (!record->job.ParseFromString(*(*values)[i]) || record->job.id().empty()) {
      spdlog::warn("coordinator: {} in {} is not a job record; skipped", keys[i],
                   store_.Describe());
      continue;
    }
    Record* r = record.get();
    jobs_[r->job.id()] = std::move(record);
    if (Terminal(r->job.state())) continue;
    EmitLocked(r, "state",
               absl::StrCat("resumed after a coordinator restart (was ",
                            JobStateName(r->job.state()), ")"));
    spdlog::info("coordinator: resuming job {} ({})", r->job.id(), JobStateName(r->job.state()));
    StartThreadLocked(r);
  }
  if (!monitor_.joinable()) monitor_ = std::thread([this] { MonitorLoop(); });
  return absl::OkStatus();
}

void JobManager::Shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ && !monitor_.joinable()) return;
    shutdown_ = true;
    for (auto& [id, record] : jobs_) {
      if (record->driver != nullptr) record->driver->Cancel();
      if (record->thread.joinable()) threads.push_back(std::move(record->thread));
    }
  }
  changed_.notify_all();
  for (std::thread& t : threads) t.join();
  if (monitor_.joinable()) monitor_.join();
}

void JobManager::StartThreadLocked(Record* record) {
  record->thread = std::thread([this, record] { RunJob(record); });
}

absl::StatusOr<std::string> JobManager::Submit(v1::JobSpec spec) {
  // Defaults, then the checks: each error names the field and what to do.
  if (spec.proposer().empty()) spec.set_proposer("synth");
  if (spec.device().empty()) spec.set_device("cuda");
  if (spec.arch().empty()) spec.set_arch(options_.default_arch);
  if (spec.top_k() == 0 && spec.target_ids().empty()) spec.set_top_k(options_.default_top_k);
  if (spec.policy().version().empty()) *spec.mutable_policy() = DefaultValidationPolicy();
  if (spec.model_name().empty()) spec.set_model_name("model");

  KF_RETURN_IF_ERROR(CheckArtifact(store_, "model", spec.model()));
  KF_RETURN_IF_ERROR(CheckArtifact(store_, "inputs", spec.inputs()));
  const int iterations = spec.budget().iterations_per_target();
  if (iterations < 1 || iterations > options_.max_iterations_per_target) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JobSpec.budget.iterations_per_target is ", iterations, "; it must be between 1 and ",
        options_.max_iterations_per_target, " (evaluations per target)"));
  }
  const double time_budget = spec.budget().time_budget_s();
  if (!(time_budget >= 0) || time_budget > options_.max_time_budget_s) {
    return absl::InvalidArgumentError(absl::StrCat("JobSpec.budget.time_budget_s is ", time_budget,
                                                   "; it must be between 0 (no wall-time "
                                                   "limit) and ",
                                                   options_.max_time_budget_s, " seconds"));
  }
  if (spec.target_ids().empty() && (spec.top_k() < 1 || spec.top_k() > options_.max_top_k)) {
    return absl::InvalidArgumentError(absl::StrCat("JobSpec.top_k is ", spec.top_k(),
                                                   "; it must be between 1 and ",
                                                   options_.max_top_k, " (targets searched)"));
  }
  if (spec.target_ids_size() > options_.max_top_k) {
    return absl::InvalidArgumentError(absl::StrCat("JobSpec.target_ids names ",
                                                   spec.target_ids_size(), " targets; at most ",
                                                   options_.max_top_k, " per job"));
  }
  if (std::set<std::string>(spec.target_ids().begin(), spec.target_ids().end()).size() !=
      static_cast<size_t>(spec.target_ids_size())) {
    return absl::InvalidArgumentError("JobSpec.target_ids lists a target twice; name each once");
  }
  if (spec.proposer() != "synth" && !IsLlmProposer(spec.proposer())) {
    return absl::InvalidArgumentError(absl::StrCat("JobSpec.proposer '", spec.proposer(),
                                                   "' is unknown; use synth, openai or "
                                                   "anthropic"));
  }
  if (spec.device() != "cuda" && spec.device() != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "JobSpec.device '", spec.device(), "' is unknown; use cuda (capture on a GPU) or cpu"));
  }
  if (!std::regex_match(spec.arch(), std::regex("sm_[0-9]{2,3}[a-z]?"))) {
    return absl::InvalidArgumentError(
        absl::StrCat("JobSpec.arch '", spec.arch(), "' is not a GPU arch like sm_90"));
  }
  if (spec.policy().random_input_sets() < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JobSpec.policy.random_input_sets is ", spec.policy().random_input_sets(),
        "; validation needs at least 3 fresh random input sets (leave the policy unset for "
        "the default)"));
  }

  auto record = std::make_unique<Record>();
  Record* r = record.get();
  r->job.set_id(NewJobId());
  *r->job.mutable_spec() = std::move(spec);
  r->job.set_state(v1::JOB_QUEUED);
  r->job.set_created_unix_s(UnixNow());
  r->job.set_updated_unix_s(r->job.created_unix_s());
  r->job.set_message("queued");
  if (absl::Status s = Persist(r); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot store the job in ", store_.Describe(), ": ", s.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down; submit again");
  const std::string id = r->job.id();
  EmitLocked(r, "state", "queued");
  jobs_[id] = std::move(record);
  StartThreadLocked(r);
  return id;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no job ", job_id, " on this coordinator; `kforge jobs` lists them"));
  }
  return it->second->job;
}

std::vector<v1::Job> JobManager::List() const {
  std::vector<v1::Job> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, record] : jobs_) jobs.push_back(record->job);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const v1::Job& a, const v1::Job& b) {
    return a.created_unix_s() > b.created_unix_s();
  });
  return jobs;
}

absl::Status JobManager::Cancel(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  Record* r = it->second.get();
  if (Terminal(r->job.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already ended (", JobStateName(r->job.state()), ")"));
  }
  r->cancel_requested = true;
  if (r->driver != nullptr) r->driver->Cancel();
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobManager::TreeBytes(const std::string& job_id,
                                                  const std::string& target_id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) {
      auto tree = it->second->trees.find(target_id);
      if (tree != it->second->trees.end()) return tree->second;
    }
  }
  KF_ASSIGN_OR_RETURN(std::optional<std::string> bytes, store_.Get(TreeKey(job_id, target_id)));
  if (!bytes) {
    return absl::NotFoundError(
        absl::StrCat("job ", job_id, " has no search tree for target ", target_id, " yet"));
  }
  return *bytes;
}

absl::StatusOr<std::vector<v1::SearchNode>> JobManager::GetTree(
    const std::string& job_id, const std::string& target_id) const {
  KF_ASSIGN_OR_RETURN(v1::Job job, Get(job_id));
  std::string target = target_id;
  if (target.empty()) {
    if (job.targets_size() != 1) {
      std::vector<std::string> ids;
      for (const v1::TargetProgress& t : job.targets()) ids.push_back(t.target().id());
      return absl::InvalidArgumentError(
          absl::StrCat("job ", job_id, " has ", job.targets_size(), " targets; name one of: ",
                       ids.empty() ? "(none selected yet)" : absl::StrJoin(ids, ", ")));
    }
    target = job.targets(0).target().id();
  }
  bool known = false;
  for (const v1::TargetProgress& t : job.targets()) known = known || t.target().id() == target;
  if (!known) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " searches no target ", target));
  }
  KF_ASSIGN_OR_RETURN(std::string bytes, TreeBytes(job_id, target));
  KF_ASSIGN_OR_RETURN(SearchTree tree, SearchTree::Deserialize(bytes));
  return tree.ToSearchNodes();
}

absl::StatusOr<v1::EvaluatedCandidate> JobManager::GetCandidate(
    const std::string& candidate_id) const {
  if (candidate_id.empty()) {
    return absl::InvalidArgumentError("GetCandidate needs a candidate id (sha256)");
  }
  for (const v1::Job& job : List()) {
    for (const v1::TargetProgress& t : job.targets()) {
      absl::StatusOr<std::string> bytes = TreeBytes(job.id(), t.target().id());
      if (!bytes.ok()) continue;
      v1::SearchTreeState state;
      if (!state.ParseFromString(*bytes)) continue;
      for (const v1::SearchTreeNodeState& node : state.nodes()) {
        if (node.evaluated().candidate().id() == candidate_id) return node.evaluated();
      }
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no search tree on this coordinator holds candidate ", candidate_id));
}

absl::StatusOr<JobEvents> JobManager::WaitEvents(const std::string& job_id, size_t from,
                                                 double timeout_s) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  const Record* r = it->second.get();
  auto end = [r] { return r->first_event + r->events.size(); };
  changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                    [&] { return shutdown_ || end() > from || Terminal(r->job.state()); });
  JobEvents out;
  for (size_t i = std::max(from, r->first_event); i < end(); ++i) {
    out.events.push_back(r->events[i - r->first_event]);
  }
  out.next = end();
  out.finished = Terminal(r->job.state());
  return out;
}

void JobManager::EmitLocked(Record* r, const std::string& kind, const std::string& message) {
  v1::JobEvent event;
  event.set_job_id(r->job.id());
  event.set_kind(kind);
  event.set_message(message);
  *event.mutable_job() = r->job;
  r->events.push_back(std::move(event));
  if (r->events.size() > options_.max_events_kept) {
    const size_t drop = r->events.size() - options_.max_events_kept;
    r->events.erase(r->events.begin(), r->events.begin() + static_cast<std::ptrdiff_t>(drop));
    r->first_event += drop;
  }
  changed_.notify_all();
}

void JobManager::UpdateLocked(Record* r, v1::JobState state, const std::string& message,
                              const std::string& kind) {
  r->job.set_state(state);
  r->job.set_message(message);
  r->job.set_updated_unix_s(UnixNow());
  EmitLocked(r, kind, message);
}

absl::Status JobManager::Persist(Record* r) {
  std::string bytes;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes = r->job.SerializeAsString();
    id = r->job.id();
  }
  return store_.Overwrite(JobKey(id), bytes);
}

bool JobManager::StopRequested(const Record* r) const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_ || r->cancel_requested;
}

void JobManager::RunJob(Record* r) {
  absl::Status status = RunSteps(r);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ && !r->cancel_requested) {
      // Left as it is in the store: the next coordinator resumes it.
      spdlog::info("coordinator: job {} stopped for shutdown ({})", r->job.id(),
                   JobStateName(r->job.state()));
      return;
    }
    if (r->cancel_requested) {
      UpdateLocked(r, v1::JOB_CANCELLED, "cancelled", "state");
    } else if (!status.ok()) {
      r->job.set_error(std::string(status.message()));
      UpdateLocked(r, v1::JOB_FAILED, absl::StrCat("failed: ", status.message()), "state");
    } else {
      std::vector<std::string> parts;
      for (const v1::TargetProgress& t : r->job.targets()) {
        parts.push_back(absl::StrFormat("%s %s", TargetOpName(t.target()),
                                        t.best_speedup() > 0
                                            ? absl::StrFormat("%.2fx", t.best_speedup())
                                            : std::string("no validated kernel")));
      }
      UpdateLocked(r, v1::JOB_DONE, absl::StrCat("done: ", absl::StrJoin(parts, "; ")), "state");
    }
  }
  if (absl::Status s = Persist(r); !s.ok()) {
    spdlog::error("coordinator: cannot store the end of job {}: {}", r->job.id(),
                  std::string(s.message()));
  }
}

absl::Status JobManager::RunSteps(Record* r) {
  v1::JobState state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = r->job.state();
  }
  if (state == v1::JOB_QUEUED || state == v1::JOB_CAPTURING) {
    KF_RETURN_IF_ERROR(CaptureAndSelect(r));
  }
  KF_RETURN_IF_ERROR(WaitForWorker(r));
  return Search(r);
}

absl::StatusOr<v1::OperatorProfile> JobManager::CaptureCached(const v1::CaptureRequest& request) {
  const std::string key =
      absl::StrCat("capture/", MakeDigest(DeterministicBytes(request)).sha256());
  if (std::optional<std::string> cached = LookupOrMiss(store_, key)) {
    v1::OperatorProfile profile;
    if (profile.ParseFromString(*cached)) return profile;
  }
  KF_ASSIGN_OR_RETURN(v1::OperatorProfile profile, capture_(request));
  if (absl::Status s = store_.Put(key, profile.SerializeAsString()); !s.ok()) {
    spdlog::warn("coordinator: cannot cache the capture: {}", std::string(s.message()));
  }
  return profile;
}

absl::Status JobManager::CaptureAndSelect(Record* r) {
  v1::JobSpec spec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spec = r->job.spec();
    UpdateLocked(r, v1::JOB_CAPTURING, absl::StrCat("capturing the model on ", spec.device()),
                 "state");
  }
  KF_RETURN_IF_ERROR(Persist(r));
  if (!capture_) {
    return absl::FailedPreconditionError(
        "this coordinator has no capture service: start `kforge serve capture` and restart the "
        "coordinator with --capture-address HOST:PORT");
  }
  v1::CaptureRequest request;
  *request.mutable_model() = spec.model();
  *request.mutable_inputs() = spec.inputs();
  request.set_device(spec.device());
  request.set_model_name(spec.model_name());
  // The synthesizer's jobs count the targets it covers (the others up to the extra, for the
  // report); an LLM's may take any, so the extra is added to what they search.
  const bool synth = !IsLlmProposer(spec.proposer());
  const int wanted = spec.target_ids().empty() ? spec.top_k() : options_.max_top_k;
  request.set_top_k(synth ? wanted : wanted + options_.captured_extra_targets);
  if (synth) request.set_uncovered_top_k(options_.captured_extra_targets);
  absl::StatusOr<v1::OperatorProfile> captured = CaptureCached(request);
  if (!captured.ok()) {
    return absl::Status(captured.status().code(),
                        absl::StrCat("capture failed: ", captured.status().message()));
  }
  v1::OperatorProfile profile = *std::move(captured);
  for (v1::Target& t : *profile.mutable_targets()) t = ForCudaKernels(std::move(t));
  if (StopRequested(r)) return absl::CancelledError("stopped");

  // Which targets the proposer can work on. The synthesizer answers a root proposal with a
  // refusal for an op no family covers; an LLM may try any op.
  absl::Status proposer_error;
  TargetRefusal refusal = nullptr;
  if (!IsLlmProposer(spec.proposer())) {
    refusal = [&](const v1::Target& target) -> std::string {
      if (!proposer_error.ok()) return "the proposer is unreachable";
      v1::ProposeRequest probe;
      *probe.mutable_target() = target;
      probe.set_n(1);
      probe.set_proposer(spec.proposer());
      probe.set_job_id(r->job.id());
      absl::StatusOr<v1::ProposeResponse> response = proposer_.Propose(probe);
      if (!response.ok()) {
        proposer_error = response.status();
        return "the proposer is unreachable";
      }
      if (!response->refusal().empty()) return response->refusal();
      if (response->candidates().empty()) return "the proposer has no candidate for it";
      return "";
    };
  }

  std::vector<v1::Target> selected;
  std::vector<SkippedTarget> skipped;
  if (!spec.target_ids().empty()) {
    for (const std::string& id : spec.target_ids()) {
      const v1::Target* found = nullptr;
      for (const v1::Target& t : profile.targets()) {
        if (t.id() == id) found = &t;
      }
      if (found == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "JobSpec.target_ids: target ", id, " is not among the ", profile.targets_size(),
            " targets captured from the model; `kforge capture` lists their ids"));
      }
      std::string why;
      if (found->captured_inputs().sha256().empty()) {
        why = "its captured inputs were not kept; validation needs them";
      } else if (found->eager_time_s() <= 0) {
        why = "no measured eager time";
      } else if (refusal) {
        why = refusal(*found);
      }
      if (!proposer_error.ok()) break;
      if (!why.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("target ", id, " ", Describe(*found),
                                                       " cannot be searched with proposer ",
                                                       spec.proposer(), ": ", why));
      }
      selected.push_back(*found);
    }
  } else {
    // Floors on a live worker's GPU of the job's arch, which selection weighs (ExpectedGain);
    // with no such worker yet, it ranks by share.
    if (std::optional<v1::GpuInfo> gpu = pool_.WorkerGpu(JobArch(spec, options_.default_arch))) {
      SetFloors(profile, *gpu);
    }
    TargetSelection selection = SelectTargets(profile, spec.top_k(), refusal);
    selected = std::move(selection.selected);
    skipped = std::move(selection.skipped);
  }
  if (!proposer_error.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot ask the proposer service which targets it "
                     "covers: ",
                     proposer_error.message()));
  }
  if (selected.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "none of the ", profile.targets_size(), " captured targets can be searched with proposer ",
        spec.proposer(),
        skipped.empty()
            ? ""
            : absl::StrCat(": ", Describe(skipped.front().target), ": ", skipped.front().reason)));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const SkippedTarget& s : skipped) {
      EmitLocked(r, "log",
                 absl::StrCat("skipped ", Describe(s.target), " (target ", s.target.id(),
                              "): ", s.reason));
    }
    r->job.clear_targets();
    std::vector<std::string> names;
    for (const v1::Target& t : selected) {
      *r->job.add_targets()->mutable_target() = t;
      names.push_back(Describe(t));
    }
    UpdateLocked(
        r, v1::JOB_SEARCHING,
        absl::StrCat("searching ", selected.size(), " targets: ", absl::StrJoin(names, "; ")),
        "state");
  }
  return Persist(r);
}

absl::Status JobManager::WaitForWorker(Record* r) {
  std::string arch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    arch = JobArch(r->job.spec(), options_.default_arch);
  }
  bool said = false;
  while (true) {
    if (StopRequested(r)) return absl::CancelledError("stopped");
    if (std::optional<v1::GpuInfo> gpu = pool_.WorkerGpu(arch)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        // A resumed job keeps the GPU its proposals were made for.
        if (!r->job.has_gpu()) *r->job.mutable_gpu() = *gpu;
        r->search_started = true;
        r->waiting_for_worker = false;
        if (said) {
          UpdateLocked(r, v1::JOB_SEARCHING,
                       absl::StrCat("a worker with a GPU of arch ", arch, " (", gpu->name(),
                                    ") connected; searching"),
                       "state");
        }
      }
      return Persist(r);
    }
    if (!said) {
      said = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        r->waiting_for_worker = true;
        UpdateLocked(r, v1::JOB_SEARCHING,
                     absl::StrCat("waiting: no worker with a GPU of arch ", arch,
                                  " is connected; start one with `kforge serve worker "
                                  "--coordinator ADDR` on such a machine"),
                     "waiting");
      }
      KF_RETURN_IF_ERROR(Persist(r));
    }
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::duration<double>(options_.monitor_interval_s),
                      [&] { return shutdown_ || r->cancel_requested; });
  }
}

absl::Status JobManager::Search(Record* r) {
  v1::Job job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = r->job;
  }
  const v1::JobSpec& spec = job.spec();
  PoolRunnerOptions runner_options;
  runner_options.compile.set_arch(JobArch(spec, options_.default_arch));
  runner_options.policy = spec.policy();
  PoolCandidateRunner runner(pool_, runner_options);

  SearchDriverOptions driver_options;
  driver_options.seed = spec.seed();
  driver_options.max_in_flight = options_.max_in_flight;
  driver_options.time_budget_s = spec.budget().time_budget_s();
  driver_options.scheduler.iterations_per_target = spec.budget().iterations_per_target();
  driver_options.scheduler.max_in_flight_per_target = options_.max_in_flight_per_target;
  if (IsLlmProposer(spec.proposer())) driver_options.search.proposals_per_expansion = 1;
  driver_options.propose.gpu = job.gpu();
  driver_options.propose.proposer = spec.proposer();
  driver_options.propose.job_id = job.id();
  SearchDriver driver(proposer_, runner, driver_options);

  // Every target resumes from its checkpoint when it has one.
  std::vector<std::string> target_ids;
  for (const v1::TargetProgress& t : job.targets()) {
    const std::string& id = t.target().id();
    target_ids.push_back(id);
    KF_ASSIGN_OR_RETURN(std::optional<std::string> bytes, store_.Get(TreeKey(job.id(), id)));
    if (bytes) {
      v1::SearchTreeState state;
      if (!state.ParseFromString(*bytes)) {
        return absl::DataLossError(absl::StrCat("the stored search tree ", TreeKey(job.id(), id),
                                                " does not parse; delete it to restart that "
                                                "target's search"));
      }
      KF_RETURN_IF_ERROR(driver.ResumeTarget(state).status());
      std::lock_guard<std::mutex> lock(mu_);
      r->trees[id] = *std::move(bytes);
    } else {
      KF_RETURN_IF_ERROR(driver.AddTarget(t.target()).status());
    }
  }

  absl::Status checkpoint_error;
  driver.OnCheckpoint([&](size_t index, const SearchTree& tree) {
    std::string bytes = tree.Serialize();
    absl::Status s = store_.Overwrite(TreeKey(job.id(), target_ids[index]), bytes);
    if (!s.ok()) {
      if (checkpoint_error.ok()) checkpoint_error = s;
      driver.Cancel();  // a search that cannot be resumed should not go on
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    r->trees[target_ids[index]] = std::move(bytes);
  });
  driver.OnProgress([&](const SearchEvent& event) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      v1::TargetProgress& progress = *r->job.mutable_targets(static_cast<int>(event.target_index));
      const double previous_best = progress.best_speedup();
      if (event.kind != SearchEvent::Kind::kReconfirmed) progress = event.progress;
      r->job.set_updated_unix_s(UnixNow());
      const std::string op = TargetOpName(progress.target());
      switch (event.kind) {
        case SearchEvent::Kind::kIteration: {
          if (metrics_) metrics_->iterations.Increment();
          const v1::EvaluatedCandidate* latest = event.latest;
          std::string verdict = latest ? v1::Verdict_Name(latest->evaluation().verdict()) : "";
          if (latest && latest->compile().status() != v1::COMPILE_OK &&
              latest->compile().status() != v1::COMPILE_STATUS_UNSPECIFIED) {
            verdict = "COMPILE_ERROR";
          }
          EmitLocked(
              r, "iteration",
              absl::StrFormat("%s: iteration %d: %s %s", op, progress.iterations(),
                              latest ? latest->candidate().id().substr(0, 12) : "", verdict));
          if (progress.best_speedup() > previous_best) {
            EmitLocked(r, "best",
                       absl::StrFormat("%s: best %.3fx (%s)", op, progress.best_speedup(),
                                       progress.best_candidate_id().substr(0, 12)));
          }
          break;
        }
        case SearchEvent::Kind::kTargetStopped:
          EmitLocked(
              r, "log",
              absl::StrCat(op, ": stopped (", std::string(StopReasonName(event.stop_reason)), ")"));
          break;
        case SearchEvent::Kind::kReconfirmed:
          EmitLocked(r, "log",
                     absl::StrFormat(
                         "%s: re-confirmed %s in a fresh process: %s %.3fx", op,
                         event.latest ? event.latest->candidate().id().substr(0, 12) : "",
                         event.latest ? v1::Verdict_Name(event.latest->evaluation().verdict()) : "",
                         event.latest ? event.latest->evaluation().speedup() : 0.0));
          break;
      }
    }
    if (absl::Status s = Persist(r); !s.ok()) {
      spdlog::warn("coordinator: cannot store progress of job {}: {}", job.id(),
                   std::string(s.message()));
    }
  });

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ || r->cancel_requested) return absl::CancelledError("stopped");
    r->driver = &driver;
  }
  absl::StatusOr<SearchResult> result = driver.Run();
  {
    std::lock_guard<std::mutex> lock(mu_);
    r->driver = nullptr;
  }
  if (!checkpoint_error.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot checkpoint the search trees in ",
                                               store_.Describe(), ": ",
                                               checkpoint_error.message()));
  }
  if (!result.ok()) return result.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < result->targets.size(); ++i) {
      const TargetSearchResult& t = result->targets[i];
      v1::TargetProgress& progress = *r->job.mutable_targets(static_cast<int>(i));
      progress = t.progress;
      for (const std::string& note : t.notes) {
        EmitLocked(r, "log", absl::StrCat(TargetOpName(progress.target()), ": ", note));
      }
      if (!t.error.empty()) {
        EmitLocked(r, "log", absl::StrCat(TargetOpName(progress.target()), ": ", t.error));
      }
    }
    *r->job.mutable_llm_usage() = result->llm_usage;
  }
  return absl::OkStatus();
}

void JobManager::MonitorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_) {
    changed_.wait_for(lock, std::chrono::duration<double>(options_.monitor_interval_s),
                      [&] { return shutdown_; });
    if (shutdown_) break;
    // Jobs whose workers went away say so (and say when one is back).
    std::vector<std::pair<Record*, std::string>> searching;
    for (auto& [id, record] : jobs_) {
      if (record->job.state() == v1::JOB_SEARCHING && record->search_started) {
        searching.emplace_back(record.get(), JobArch(record->job.spec(), options_.default_arch));
      }
    }
    std::map<std::string, bool> has_worker;
    lock.unlock();
    for (const auto& [r, arch] : searching) {
      if (!has_worker.contains(arch)) has_worker[arch] = pool_.WorkerGpu(arch).has_value();
    }
    const TaskPoolStats stats = pool_.Stats();
    lock.lock();
    for (const auto& [r, arch] : searching) {
      if (r->job.state() != v1::JOB_SEARCHING) continue;
      const bool none = !has_worker[arch];
      if (none == r->waiting_for_worker) continue;
      r->waiting_for_worker = none;
      r->job.set_message(
          none ? absl::StrCat("waiting: no worker with a GPU of arch ", arch,
                              " is connected; its tasks stay queued until one is")
               : absl::StrCat("searching: a worker with a GPU of arch ", arch, " is connected"));
      EmitLocked(r, none ? "waiting" : "state", r->job.message());
    }
    if (metrics_) {
      metrics_->queue_depth.Set(static_cast<double>(stats.table.queued));
      metrics_->leased.Set(static_cast<double>(stats.table.leased));
      metrics_->tasks_failed.Set(static_cast<double>(stats.table.failed));
      metrics_->in_flight.Set(static_cast<double>(stats.waiting_tasks));
      for (v1::WorkerState state : {v1::WORKER_IDLE, v1::WORKER_BUSY, v1::WORKER_DRAINING}) {
        auto it = stats.table.workers_by_state.find(state);
        metrics_->workers
            .Add({{"state", state == v1::WORKER_IDLE   ? "idle"
                            : state == v1::WORKER_BUSY ? "busy"
                                                       : "draining"}})
            .Set(it == stats.table.workers_by_state.end() ? 0.0 : static_cast<double>(it->second));
      }
      if (stats.table.lease_expiries_total > metrics_->expiries_seen) {
        metrics_->lease_expiries.Increment(
            static_cast<double>(stats.table.lease_expiries_total - metrics_->expiries_seen));
        metrics_->expiries_seen = stats.table.lease_expiries_total;
      }
      std::map<v1::JobState, int> by_state;
      for (auto& [id, record] : jobs_) {
        ++by_state[record->job.state()];
        double best = 0;
        for (const v1::TargetProgress& t : record->job.targets()) {
          best = std::max(best, t.best_speedup());
        }
        metrics_->best_speedup.Add({{"job", id}}).Set(best);
      }
      for (v1::JobState state : {v1::JOB_QUEUED, v1::JOB_CAPTURING, v1::JOB_SEARCHING, v1::JOB_DONE,
                                 v1::JOB_FAILED, v1::JOB_CANCELLED}) {
        metrics_->jobs.Add({{"state", JobStateName(state)}}).Set(by_state[state]);
      }
    }
  }
}

}  // namespace kforge
