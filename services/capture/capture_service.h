// CaptureService: the gRPC adapter over Capturer. Model and inputs arrive as store digests;
// the profile's targets reference their captured inputs in the same store.
#pragma once

#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "common/grpc_server.h"
#include "common/store.h"
#include "kforge/v1/capture.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "services/capture/capturer.h"

namespace kforge {

class CaptureServiceImpl final : public v1::CaptureService::Service {
 public:
  // `store` is not owned and must outlive the service.
  explicit CaptureServiceImpl(Store* store, FamilyLookup family = nullptr);

  // kforge_capture_requests_total{code} and kforge_capture_duration_seconds.
  void RegisterMetrics(prometheus::Registry& registry);

  grpc::Status Capture(grpc::ServerContext* context, const v1::CaptureRequest* request,
                       v1::CaptureResponse* response) override;

 private:
  Store* store_;
  FamilyLookup family_;
  // One capture at a time: it owns the device's timing and LibTorch's executor settings.
  std::mutex capture_mu_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Histogram* duration_ = nullptr;
};

// Serves CaptureService (with health, reflection and /metrics) until the server is shut down.
absl::Status RunCaptureServer(const ServerOptions& options, Store* store,
                              FamilyLookup family = nullptr);

}  // namespace kforge
