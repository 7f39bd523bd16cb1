// CaptureService over Capturer (see capture_service.h).
#include "services/capture/capture_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/grpc_status.h"
#include "common/serve_flags.h"
#include "spdlog/spdlog.h"

namespace kforge {

CaptureServiceImpl::CaptureServiceImpl(Store* store, FamilyLookup family)
    : store_(store), family_(std::move(family)) {}

void CaptureServiceImpl::RegisterMetrics(prometheus::Registry& registry) {
  requests_ = &prometheus::BuildCounter()
                   .Name("kforge_capture_requests_total")
                   .Help("Capture requests by result code")
                   .Register(registry);
  duration_ =
      &prometheus::BuildHistogram()
           .Name("kforge_capture_duration_seconds")
           .Help("Time to capture one model")
           .Register(registry)
           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 5, 10, 30, 60, 120, 300, 600});
}

grpc::Status CaptureServiceImpl::Capture(grpc::ServerContext* /*context*/,
                                         const v1::CaptureRequest* request,
                                         v1::CaptureResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](const absl::Status& status) {
    if (requests_ != nullptr) {
      requests_->Add({{"code", absl::StatusCodeToString(status.code())}}).Increment();
    }
    if (duration_ != nullptr && status.ok()) {
      duration_->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!status.ok()) spdlog::warn("capture failed: {}", status.ToString());
    return ToGrpcStatus(status);
  };
  if (request->model().sha256().empty() || request->inputs().sha256().empty()) {
    return finish(absl::InvalidArgumentError(
        "CaptureRequest needs the model and inputs digests; PutBlob them into the store first"));
  }
  CaptureOptions options;
  auto model = GetBlob(*store_, request->model());
  if (!model.ok()) {
    return finish(absl::Status(
        model.status().code(),
        absl::StrCat("model blob ", request->model().sha256(), ": ", model.status().message())));
  }
  auto inputs = GetBlob(*store_, request->inputs());
  if (!inputs.ok()) {
    return finish(absl::Status(
        inputs.status().code(),
        absl::StrCat("inputs blob ", request->inputs().sha256(), ": ", inputs.status().message())));
  }
  options.model_bytes = std::move(*model);
  options.inputs_bytes = std::move(*inputs);
  options.model_path = absl::StrCat("model blob ", request->model().sha256().substr(0, 12));
  options.inputs_path = absl::StrCat("inputs blob ", request->inputs().sha256().substr(0, 12));
  options.model_name = request->model_name().empty() ? "model" : request->model_name();
  if (!request->device().empty()) options.device = request->device();
  if (request->warmup() > 0) options.warmup = request->warmup();
  if (request->iters() > 0) options.iters = request->iters();
  if (request->top_k() > 0) options.top_k = request->top_k();
  if (request->has_uncovered_top_k()) options.uncovered_top_k = request->uncovered_top_k();

  std::lock_guard<std::mutex> lock(capture_mu_);
  auto result = Capturer::Run(options, store_, family_);
  if (!result.ok()) return finish(result.status());
  *response->mutable_profile() = std::move(result->profile);
  return finish(absl::OkStatus());
}

absl::Status RunCaptureServer(const ServerOptions& options, Store* store, FamilyLookup family) {
  CaptureServiceImpl service(store, std::move(family));
  auto server = GrpcServer::Create(options, {&service});
  if (!server.ok()) return server.status();
  service.RegisterMetrics(*(*server)->registry());
  spdlog::info("capture service on port {} (store {})", (*server)->port(), store->Describe());
  ServeUntilSignal(**server);
  return absl::OkStatus();
}

}  // namespace kforge
