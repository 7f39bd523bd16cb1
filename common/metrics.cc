// MetricsServer over prometheus-cpp's Exposer (CivetWeb).
#include "common/metrics.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    std::string address, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  // prometheus-cpp reports a bind failure by throwing; it must not escape this module.
  try {
    exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot serve /metrics on ", address, ": ", e.what(),
                     "; pick a free HOST:PORT with --metrics_address"));
  }
  std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot serve /metrics on ", address, ": no listening port"));
  }
  exposer->RegisterCollectable(registry);
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(registry), std::move(exposer), ports.front()));
}

MetricsServer::MetricsServer(std::shared_ptr<prometheus::Registry> registry,
                             std::unique_ptr<prometheus::Exposer> exposer, int port)
    : registry_(std::move(registry)), exposer_(std::move(exposer)), port_(port) {}

}  // namespace kforge
