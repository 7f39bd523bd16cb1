// PoolCandidateRunner: compile and evaluate tasks in the TaskPool (see pool_runner.h).
#include "services/coordinator/pool/pool_runner.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kforge/v1/worker.pb.h"

namespace kforge {
namespace {

v1::Task MakeTask(v1::TaskKind kind, const google::protobuf::Message& request) {
  v1::Task task;
  task.set_task_id(TaskId(kind, request));
  task.set_kind(kind);
  task.set_request(DeterministicBytes(request));
  return task;
}

}  // namespace

PoolCandidateRunner::PoolCandidateRunner(TaskPool& pool, PoolRunnerOptions options)
    : pool_(pool),
      options_(std::move(options)),
      in_flight_(std::make_shared<std::atomic<int64_t>>(0)) {}

v1::CompileRequest PoolCandidateRunner::CompileRequestFor(const v1::Candidate& candidate,
                                                          const v1::CompileOptions& options) {
  v1::CompileRequest request;
  // Only what the compiler reads: the id, parent and provenance do not change the cubin, so
  // the same kernel reached from two parents compiles once.
  request.mutable_candidate()->set_id(candidate.id());
  request.mutable_candidate()->set_source(candidate.source());
  request.mutable_candidate()->set_launch_plan_json(candidate.launch_plan_json());
  *request.mutable_options() = options;
  return request;
}

void PoolCandidateRunner::Run(const v1::Target& target, const v1::Candidate& candidate,
                              const RunOptions& run_options, Done done) {
  in_flight_->fetch_add(1);
  auto in_flight = in_flight_;
  auto finish = std::make_shared<Done>(
      [in_flight, done = std::move(done)](absl::StatusOr<RunOutcome> outcome) {
        in_flight->fetch_sub(1);
        done(std::move(outcome));
      });

  v1::EvaluateRequest evaluate;
  *evaluate.mutable_target() = target;
  *evaluate.mutable_candidate() = candidate;
  *evaluate.mutable_options() = options_.compile;
  *evaluate.mutable_policy() = options_.policy;
  evaluate.set_fresh_process(run_options.fresh_process);
  evaluate.set_timing(options_.timing);
  const std::string arch = options_.compile.arch();
  TaskPool* pool = &pool_;

  auto on_compiled = [pool, finish, arch,
                      evaluate = std::move(evaluate)](absl::StatusOr<std::string> result) mutable {
    RunOutcome outcome;
    if (absl::IsCancelled(result.status())) {
      (*finish)(result.status());
      return;
    }
    if (!result.ok()) {
      // Workers died compiling it max_attempts times: the candidate's failure, not the pool's.
      outcome.compile.set_status(v1::COMPILE_RESOURCE_LIMIT);
      outcome.compile.set_log(std::string(result.status().message()));
      (*finish)(std::move(outcome));
      return;
    }
    if (!outcome.compile.ParseFromString(*result)) {
      (*finish)(
          absl::DataLossError(absl::StrCat("a worker returned a compile result for ",
                                           evaluate.candidate().id(), " that does not parse")));
      return;
    }
    if (outcome.compile.status() != v1::COMPILE_OK) {
      (*finish)(std::move(outcome));  // EffectiveVerdict: COMPILE_ERROR
      return;
    }
    v1::Task task = MakeTask(v1::TASK_EVALUATE, evaluate);
    const std::string candidate_id = evaluate.candidate().id();
    pool->Submit(
        std::move(task), arch,
        [finish, compile = std::move(outcome.compile),
         candidate_id](absl::StatusOr<std::string> result) mutable {
          RunOutcome outcome;
          outcome.compile = std::move(compile);
          if (absl::IsCancelled(result.status())) {
            (*finish)(result.status());
            return;
          }
          if (!result.ok()) {
            outcome.evaluation.set_verdict(v1::CRASH);
            outcome.evaluation.mutable_diagnostics()->set_message(
                std::string(result.status().message()));
            (*finish)(std::move(outcome));
            return;
          }
          if (!outcome.evaluation.ParseFromString(*result)) {
            (*finish)(absl::DataLossError(absl::StrCat("a worker returned an evaluation of ",
                                                       candidate_id, " that does not parse")));
            return;
          }
          (*finish)(std::move(outcome));
        });
  };
  pool_.Submit(MakeTask(v1::TASK_COMPILE, CompileRequestFor(candidate, options_.compile)), "",
               std::move(on_compiled));
}

}  // namespace kforge
