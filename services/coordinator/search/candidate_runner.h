// CandidateRunner: the one interface through which the search compiles, validates and times a
// candidate. The embedded runner (compiler + evaluator in this process) and the distributed
// coordinator (workers under leases) implement it; the search depends on nothing else.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

struct RunOptions {
  // Run the evaluation in a fresh evaluator process: used to re-confirm a search winner,
  // whose in-search time is the best of many noisy samples and so biased low.
  bool fresh_process = false;
};

// What became of one candidate. Candidate failures are data here (compile.status,
// evaluation.verdict and its diagnostics), never a non-OK status.
struct RunOutcome {
  v1::CompileResult compile;
  v1::EvaluationResult evaluation;
};

// The verdict the search records for an outcome: COMPILE_ERROR when compilation failed,
// whatever the evaluation says; NOT_EVALUATED when no verdict was set; else the verdict.
v1::Verdict EffectiveVerdict(const RunOutcome& outcome);

class CandidateRunner {
 public:
  // Called exactly once per Run, from any thread, possibly before Run returns. A non-OK
  // status means the runner itself failed (shut down, no workers left), not the candidate;
  // the search stops on it.
  using Done = std::function<void(absl::StatusOr<RunOutcome>)>;

  virtual ~CandidateRunner() = default;
  // Compiles, validates and times `candidate` for `target`; must not block until the
  // evaluation ends (the search keeps several in flight).
  virtual void Run(const v1::Target& target, const v1::Candidate& candidate,
                   const RunOptions& options, Done done) = 0;
};

}  // namespace kforge
