// CompileServiceImpl: the gRPC face of Compiler (kforge.v1.CompileService), plus its
// Prometheus metrics. Thin: every decision is Compiler's.
#pragma once

#include "kforge/v1/worker.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "services/worker/compiler.h"

namespace kforge {

class CompileServiceImpl final : public v1::CompileService::Service {
 public:
  // `compiler` must outlive the service. `registry` may be null (no metrics); otherwise it
  // gets kforge_compile_duration_seconds{cache="hit|miss"} and
  // kforge_compiles_total{status="ok|failed|timeout|resource_limit|refused"}.
  CompileServiceImpl(Compiler* compiler, prometheus::Registry* registry);

  // Always an OK RPC status: compile failures are data in the result.
  grpc::Status Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                       v1::CompileResult* response) override;

 private:
  Compiler* compiler_;
  prometheus::Family<prometheus::Histogram>* duration_ = nullptr;
  prometheus::Family<prometheus::Counter>* compiles_ = nullptr;
};

// The metric label of a status: "ok", "failed", "timeout", "resource_limit", "refused".
const char* CompileStatusLabel(v1::CompileStatus status);

}  // namespace kforge
