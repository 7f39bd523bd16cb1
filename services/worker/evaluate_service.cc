// EvaluateServiceImpl: gRPC adapter and metrics of the worker's evaluate side.
#include "services/worker/evaluate_service.h"

#include "absl/strings/ascii.h"
#include "common/status.h"

namespace kforge {

std::string VerdictLabel(v1::Verdict verdict) {
  return absl::AsciiStrToLower(v1::Verdict_Name(verdict));
}

EvaluateServiceImpl::EvaluateServiceImpl(EvaluationPipeline* pipeline, Evaluator* evaluator,
                                         prometheus::Registry* registry)
    : pipeline_(pipeline), evaluator_(evaluator) {
  if (registry != nullptr) {
    evaluations_ = &prometheus::BuildCounter()
                        .Name("kforge_evaluations_total")
                        .Help("Candidate evaluations by verdict")
                        .Register(*registry);
    restarts_ = &prometheus::BuildCounter()
                     .Name("kforge_evaluator_restarts_total")
                     .Help("Evaluator child processes that died or were killed (hang, crash, "
                           "lost CUDA context) and were restarted")
                     .Register(*registry)
                     .Add({});
    busy_seconds_ = &prometheus::BuildCounter()
                         .Name("kforge_gpu_busy_seconds_total")
                         .Help("Seconds a GPU was held by an evaluation")
                         .Register(*registry)
                         .Add({});
  }
  evaluator_->SetObserver([this](const EvaluationEvent& event) {
    if (busy_seconds_ != nullptr) busy_seconds_->Increment(event.busy_s);
    if (restarts_ != nullptr && event.child_restarted) restarts_->Increment();
  });
}

grpc::Status EvaluateServiceImpl::Evaluate(grpc::ServerContext* /*context*/,
                                           const v1::EvaluateRequest* request,
                                           v1::EvaluationResult* response) {
  if (!request->has_target() || request->target().nodes().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "EvaluateRequest.target is missing or has no nodes; send the target from the capture"));
  }
  if (request->candidate().source().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "EvaluateRequest.candidate.source is empty; send the kernel's device code"));
  }
  *response = pipeline_->Evaluate(*request);
  if (evaluations_ != nullptr) {
    evaluations_->Add({{"verdict", VerdictLabel(response->verdict())}}).Increment();
  }
  return grpc::Status::OK;
}

grpc::Status EvaluateServiceImpl::GetGpuInfo(grpc::ServerContext* /*context*/,
                                             const v1::GetGpuInfoRequest* /*request*/,
                                             v1::GetGpuInfoResponse* response) {
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator_->GetGpuInfo();
  if (!gpus.ok()) return ToGrpcStatus(gpus.status());
  for (v1::GpuInfo& gpu : *gpus) *response->add_gpus() = std::move(gpu);
  return grpc::Status::OK;
}

}  // namespace kforge
