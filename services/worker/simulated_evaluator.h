// SimulatedEvaluator — TEST-ONLY. Stands in for the GPU evaluator where there is no GPU (CI),
// so the distributed coordinator can be exercised end to end with real processes: its
// "timing" and verdict are a deterministic function of the candidate's parameters and source
// hash, NOT a measurement. `kforge serve worker --simulated-evaluator` turns it on and every
// result it produces says so in its diagnostics and GPU name. Never use it to judge a kernel.
#pragma once

#include <string>

#include "kforge/v1/common.pb.h"
#include "kforge/v1/worker.pb.h"

namespace kforge {

class SimulatedEvaluator {
 public:
  // `arch`: the GPU arch the simulated worker reports ("sm_90").
  explicit SimulatedEvaluator(std::string arch) : arch_(std::move(arch)) {}

  // The simulated GPU (name "Simulated GPU (test-only)").
  v1::GpuInfo Gpu() const;

  // For a request whose candidate compiled (`compiled` is its COMPILE_OK result):
  //   speedup = 0.5 + 2.5 * mean_p(u(target, p))^1.5 over the candidate's parameters p (or
  //             u over the source when it has none), u a sha256-derived number in [0, 1) —
  //             so parameters that are good stay good in every kernel that has them, and the
  //             search has a landscape to climb;
  //   verdict = MISMATCH for about 1 candidate in 16 (by the sha256 of its id), else PASS;
  //   eager   = target.eager_time_s (1e-4 s when unknown), candidate = eager / speedup.
  // The same request gives the same result, in any process (fresh_process included).
  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const v1::CompileResult& compiled) const;

  // The simulated speedup of `candidate` for `target` (what a PASS reports).
  static double SimulatedSpeedup(const v1::Target& target, const v1::Candidate& candidate);

 private:
  std::string arch_;
};

}  // namespace kforge
