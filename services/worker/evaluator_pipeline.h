// EvaluationPipeline: everything the worker does with one EvaluateRequest — compile (through
// the compile cache), fetch the captured inputs from the store, look up the evaluation cache,
// evaluate on a GPU, cache the result. Shared by EvaluateServiceImpl, `kforge eval` and the
// embedded runner.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "common/store.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/worker.pb.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"

namespace kforge {

struct EvaluationPipelineOptions {
  // How long failed verdicts stay cached; a PASS is kept without expiry.
  absl::Duration failure_ttl = absl::Minutes(10);
};

class EvaluationPipeline {
 public:
  // `compiler` and `evaluator` must outlive the pipeline; `store` may be null (no caching,
  // and captured inputs must then be passed to Evaluate).
  EvaluationPipeline(Compiler* compiler, Evaluator* evaluator, Store* store,
                     EvaluationPipelineOptions options = {});

  // Never fails: problems are verdicts (COMPILE_ERROR, NOT_EVALUATED for missing inputs, ...).
  // `captured_inputs` (torch.save bytes) overrides fetching target.captured_inputs.
  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const std::string& captured_inputs = "");

  // The evaluation cache key, "eval/<sha256>" over the compiled artifact, the target's
  // subgraph and signature, the captured inputs, the policy, the timing flag and the GPU.
  static std::string CacheKey(const v1::CompileResult& compiled,
                              const v1::EvaluateRequest& request, const std::string& gpu_name);

 private:
  Compiler* compiler_;
  Evaluator* evaluator_;
  Store* store_;
  EvaluationPipelineOptions options_;
};

}  // namespace kforge
