// GpuLane: one local GPU as the embedded runner sees it — it validates and times one compiled
// candidate at a time. EvaluatorGpuLane is the real one (a kforge-evaluator child for that GPU
// behind the worker's EvaluationPipeline, with its compile and evaluation caches); tests of
// the runner's pool logic substitute a test double.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/worker.pb.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"

namespace kforge {

class GpuLane {
 public:
  virtual ~GpuLane() = default;
  // Blocks until the evaluation ends. The runner calls it from one thread at a time per lane.
  // `captured_inputs` are the target's real inputs (torch.save bytes). Never fails: problems
  // are verdicts.
  virtual v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                        const std::string& captured_inputs) = 0;
  // "GPU 0", for messages.
  virtual std::string Name() const = 0;
};

class EvaluatorGpuLane : public GpuLane {
 public:
  // `compiler` and `store` (may be null) must outlive the lane. Starts no child yet.
  static absl::StatusOr<std::unique_ptr<EvaluatorGpuLane>> Create(int gpu, Compiler* compiler,
                                                                  Store* store,
                                                                  EvaluatorOptions options = {});

  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const std::string& captured_inputs) override;
  std::string Name() const override;

  // The GPU's properties, starting its evaluator child; an error says why it cannot be used.
  absl::StatusOr<v1::GpuInfo> Info();

 private:
  EvaluatorGpuLane(int gpu, std::unique_ptr<Evaluator> evaluator, Compiler* compiler, Store* store);

  int gpu_;
  std::unique_ptr<Evaluator> evaluator_;
  EvaluationPipeline pipeline_;
};

}  // namespace kforge
