// GrpcServer: the one way every kforge service is served (health, reflection, TLS, bearer
// token, /metrics, graceful shutdown), and MakeChannel, the matching client side.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "prometheus/registry.h"

namespace kforge {

struct ServerOptions {
  std::string address = "0.0.0.0:50051";  // port 0 picks a free port, see port()
  // Both set: TLS. Both empty: plaintext.
  std::string tls_cert_file, tls_key_file;
  // Non-empty: every call must carry "authorization: Bearer <token>", else UNAUTHENTICATED.
  // Health checks stay open so load balancers and kubelet probes work without it.
  std::string auth_token;
  // Non-empty: serve registry() as /metrics on this HOST:PORT.
  std::string metrics_address;
  // The registry to serve; null makes a new one. Services that register their metrics at
  // construction pass theirs here.
  std::shared_ptr<prometheus::Registry> registry;
};

class GrpcServer {
 public:
  // Starts serving `services` (not owned; they must outlive the server). Health status is
  // SERVING for "" and each service's full name once this returns.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(
      const ServerOptions& options, std::vector<grpc::Service*> services);
  ~GrpcServer();

  int port() const { return port_; }
  // The bound /metrics port, 0 when metrics are not served.
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // Services register their metrics here.
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // Full names of the served services (including health and reflection).
  const std::vector<std::string>& service_names() const { return service_names_; }

  // Blocks until Shutdown has finished.
  void Wait();
  // Reports NOT_SERVING, stops accepting calls, lets in-flight calls finish until
  // `deadline` (then cancels them) and joins. Idempotent.
  void Shutdown(absl::Duration deadline = absl::Seconds(10));

 private:
  GrpcServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> service_names_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

struct ClientOptions {
  std::string tls_ca_file;  // non-empty: TLS, trusting this CA (PEM)
  std::string auth_token;   // non-empty: sent as "authorization: Bearer <token>" on every call
};

// A channel to `target` ("host:port"). An unreadable CA file is logged and the channel
// then fails its calls with UNAVAILABLE.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options);

}  // namespace kforge
