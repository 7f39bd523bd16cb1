// gRPC adapter of Compiler with its metrics (see compile_service.h).
#include "services/worker/compile_service.h"

namespace kforge {

const char* CompileStatusLabel(v1::CompileStatus status) {
  switch (status) {
    case v1::COMPILE_OK:
      return "ok";
    case v1::COMPILE_FAILED:
      return "failed";
    case v1::COMPILE_TIMEOUT:
      return "timeout";
    case v1::COMPILE_RESOURCE_LIMIT:
      return "resource_limit";
    case v1::COMPILE_REFUSED:
      return "refused";
    default:
      return "unspecified";
  }
}

CompileServiceImpl::CompileServiceImpl(Compiler* compiler, prometheus::Registry* registry)
    : compiler_(compiler) {
  if (registry == nullptr) return;
  duration_ = &prometheus::BuildHistogram()
                   .Name("kforge_compile_duration_seconds")
                   .Help("Wall time of one Compile call, cache lookups included")
                   .Register(*registry);
  compiles_ = &prometheus::BuildCounter()
                   .Name("kforge_compiles_total")
                   .Help("Compile calls by result status")
                   .Register(*registry);
}

grpc::Status CompileServiceImpl::Compile(grpc::ServerContext* /*context*/,
                                         const v1::CompileRequest* request,
                                         v1::CompileResult* response) {
  *response = compiler_->Compile(request->candidate(), request->options());
  if (duration_ != nullptr) {
    static const prometheus::Histogram::BucketBoundaries kBuckets = {
        0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120};
    duration_->Add({{"cache", response->cache_hit() ? "hit" : "miss"}}, kBuckets)
        .Observe(response->duration_s());
    compiles_->Add({{"status", CompileStatusLabel(response->status())}}).Increment();
  }
  return grpc::Status::OK;
}

}  // namespace kforge
