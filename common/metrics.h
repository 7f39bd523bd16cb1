// MetricsServer: a Prometheus registry served as /metrics over HTTP.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace httplib {
class Server;
}

namespace kforge {

// Metric names follow Prometheus' guide: base units, counters end in _total, times in
// _seconds, no unbounded labels. Served by cpp-httplib with prometheus-cpp's text format:
// prometheus-cpp's own CivetWeb exposer fails to start inside the kforge binary.
class MetricsServer {
 public:
  // address: "HOST:PORT" ("0.0.0.0:9090"); port 0 picks a free port (see port()).
  // `registry` is served; null creates a new one. FAILED_PRECONDITION if it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(
      std::string address, std::shared_ptr<prometheus::Registry> registry = nullptr);
  ~MetricsServer();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // The bound port.
  int port() const { return port_; }

 private:
  MetricsServer(std::shared_ptr<prometheus::Registry> registry);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace kforge
