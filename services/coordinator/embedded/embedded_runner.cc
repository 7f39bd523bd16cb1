// EmbeddedRunner: compile pool + one evaluation thread per GPU lane (see embedded_runner.h).
#include "services/coordinator/embedded/embedded_runner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

absl::Status Stopped() {
  return absl::CancelledError("the embedded runner was shut down before this candidate ran");
}

}  // namespace

EmbeddedRunner::EmbeddedRunner(CompileFunction compile, InputsFunction inputs,
                               std::vector<std::unique_ptr<GpuLane>> lanes,
                               EmbeddedRunnerOptions options)
    : compile_(std::move(compile)),
      inputs_(std::move(inputs)),
      lanes_(std::move(lanes)),
      options_(std::move(options)) {
  if (options_.policy.version().empty()) {
    options_.policy = DefaultValidationPolicy();
  }
  stats_.evaluations_per_lane.assign(lanes_.size(), 0);
  const int compile_threads = std::max(1, options_.compile_threads);
  for (int i = 0; i < compile_threads; ++i) threads_.emplace_back([this] { CompileLoop(); });
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    threads_.emplace_back([this, lane] { LaneLoop(lane); });
  }
}

EmbeddedRunner::~EmbeddedRunner() { Shutdown(); }

void EmbeddedRunner::Shutdown() {
  std::deque<std::unique_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (auto* queue : {&compile_queue_, &eval_queue_}) {
      while (!queue->empty()) {
        dropped.push_back(std::move(queue->front()));
        queue->pop_front();
      }
    }
  }
  work_.notify_all();
  for (auto& job : dropped) job->done(Stopped());
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void EmbeddedRunner::Run(const v1::Target& target, const v1::Candidate& candidate,
                         const RunOptions& options, Done done) {
  auto job = std::make_unique<Job>();
  job->target = target;
  job->candidate = candidate;
  job->options = options;
  job->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      compile_queue_.push_back(std::move(job));
    }
  }
  if (job) {  // still ours: not queued because the runner is shut down
    job->done(Stopped());
    return;
  }
  work_.notify_all();
}

EmbeddedRunnerStats EmbeddedRunner::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EmbeddedRunner::CompileLoop() {
  while (true) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stopping_ || !compile_queue_.empty(); });
      if (stopping_) return;
      job = std::move(compile_queue_.front());
      compile_queue_.pop_front();
    }
    job->outcome.compile = compile_(job->candidate, options_.compile);
    const bool compiled = job->outcome.compile.status() == v1::COMPILE_OK;
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.compiles;
      if (job->outcome.compile.cache_hit()) ++stats_.compile_cache_hits;
      if (compiled) ++stats_.compiled_ok;
      if (compiled && !lanes_.empty() && !stopping_) {
        eval_queue_.push_back(std::move(job));
        queued = true;
      }
    }
    if (queued) {
      work_.notify_all();
      continue;
    }
    if (compiled && !lanes_.empty()) {  // shut down between compile and evaluation
      job->done(Stopped());
      continue;
    }
    if (compiled) {
      v1::EvaluationResult& evaluation = job->outcome.evaluation;
      evaluation.set_verdict(v1::NOT_EVALUATED);
      evaluation.mutable_diagnostics()->set_message(kNoGpuMessage);
      evaluation.set_policy_version(options_.policy.version());
    }
    // A failed compile carries no evaluation; EffectiveVerdict makes it COMPILE_ERROR.
    job->done(std::move(job->outcome));
  }
}

void EmbeddedRunner::LaneLoop(size_t lane) {
  while (true) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stopping_ || !eval_queue_.empty(); });
      if (stopping_) return;
      job = std::move(eval_queue_.front());
      eval_queue_.pop_front();
    }
    Evaluate(lane, *job);
  }
}

void EmbeddedRunner::Evaluate(size_t lane, Job& job) {
  absl::StatusOr<std::shared_ptr<const std::string>> inputs = InputsOf(job.target);
  if (!inputs.ok()) {
    job.done(inputs.status());
    return;
  }
  v1::EvaluateRequest request;
  *request.mutable_target() = job.target;
  *request.mutable_candidate() = job.candidate;
  *request.mutable_options() = options_.compile;
  *request.mutable_policy() = options_.policy;
  request.set_fresh_process(job.options.fresh_process);
  request.set_timing(options_.timing);
  v1::EvaluationResult result = lanes_[lane]->Evaluate(request, **inputs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.evaluations_per_lane[lane];
  }
  if (result.verdict() == v1::NOT_EVALUATED || result.verdict() == v1::VERDICT_UNSPECIFIED) {
    // Says something about this machine, not the candidate (see Run).
    job.done(absl::FailedPreconditionError(absl::StrCat(
        lanes_[lane]->Name(), " could not evaluate candidate ", job.candidate.id(), ": ",
        result.diagnostics().message().empty() ? "no verdict" : result.diagnostics().message())));
    return;
  }
  job.outcome.evaluation = std::move(result);
  job.done(std::move(job.outcome));
}

absl::StatusOr<std::shared_ptr<const std::string>> EmbeddedRunner::InputsOf(
    const v1::Target& target) {
  std::lock_guard<std::mutex> lock(inputs_mu_);
  auto it = inputs_by_target_.find(target.id());
  if (it != inputs_by_target_.end()) return it->second;
  std::string bytes;
  if (inputs_) {
    absl::StatusOr<std::string> fetched = inputs_(target);
    if (!fetched.ok()) return fetched.status();
    bytes = *std::move(fetched);
  }
  auto shared = std::make_shared<const std::string>(std::move(bytes));
  inputs_by_target_.emplace(target.id(), shared);
  return shared;
}

}  // namespace kforge
