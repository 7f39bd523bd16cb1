// EvaluateServiceImpl: the gRPC face of the worker's EvaluationPipeline and Evaluator
// (kforge.v1.EvaluateService), plus their Prometheus metrics. Thin: every decision is theirs.
#pragma once

#include "kforge/v1/worker.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"

namespace kforge {

class EvaluateServiceImpl final : public v1::EvaluateService::Service {
 public:
  // `pipeline` and `evaluator` must outlive the service. `registry` may be null (no
  // metrics); otherwise it gets kforge_evaluations_total{verdict}, 
  // kforge_evaluator_restarts_total and kforge_gpu_busy_seconds_total. Installs itself as
  // the evaluator's observer.
  EvaluateServiceImpl(EvaluationPipeline* pipeline, Evaluator* evaluator,
                      prometheus::Registry* registry);

  // An OK RPC status for every evaluated candidate, failures included (they are verdicts);
  // INVALID_ARGUMENT for a request without a target or candidate.
  grpc::Status Evaluate(grpc::ServerContext* context, const v1::EvaluateRequest* request,
                        v1::EvaluationResult* response) override;
  // FAILED_PRECONDITION when no GPU can be used here, with the reason.
  grpc::Status GetGpuInfo(grpc::ServerContext* context, const v1::GetGpuInfoRequest* request,
                          v1::GetGpuInfoResponse* response) override;

 private:
  EvaluationPipeline* pipeline_;
  Evaluator* evaluator_;
  prometheus::Family<prometheus::Counter>* evaluations_ = nullptr;
  prometheus::Counter* restarts_ = nullptr;
  prometheus::Counter* busy_seconds_ = nullptr;
};

// The metric label of a verdict: "pass", "mismatch", "not_evaluated", ...
std::string VerdictLabel(v1::Verdict verdict);

}  // namespace kforge
