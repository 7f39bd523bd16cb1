// EvaluatorGpuLane: one GPU's evaluator child behind the EvaluationPipeline (see gpu_lane.h).
#include "services/coordinator/embedded/gpu_lane.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<EvaluatorGpuLane>> EvaluatorGpuLane::Create(
    int gpu, Compiler* compiler, Store* store, EvaluatorOptions options) {
  options.gpus = {gpu};
  absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(std::move(options));
  if (!evaluator.ok()) {
    return absl::Status(evaluator.status().code(),
                        absl::StrCat("cannot set up the evaluator for GPU ", gpu, ": ",
                                     evaluator.status().message()));
  }
  return std::unique_ptr<EvaluatorGpuLane>(
      new EvaluatorGpuLane(gpu, *std::move(evaluator), compiler, store));
}

EvaluatorGpuLane::EvaluatorGpuLane(int gpu, std::unique_ptr<Evaluator> evaluator,
                                   Compiler* compiler, Store* store)
    : gpu_(gpu), evaluator_(std::move(evaluator)), pipeline_(compiler, evaluator_.get(), store) {}

v1::EvaluationResult EvaluatorGpuLane::Evaluate(const v1::EvaluateRequest& request,
                                                const std::string& captured_inputs) {
  return pipeline_.Evaluate(request, captured_inputs);
}

std::string EvaluatorGpuLane::Name() const { return absl::StrCat("GPU ", gpu_); }

absl::StatusOr<v1::GpuInfo> EvaluatorGpuLane::Info() {
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator_->GetGpuInfo();
  if (!gpus.ok()) return gpus.status();
  if (gpus->empty())
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", gpu_, " answered with no properties"));
  return gpus->front();
}

}  // namespace kforge
