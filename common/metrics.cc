// MetricsServer over cpp-httplib and prometheus-cpp's text serializer.
#include "common/metrics.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/http_listen.h"
#include "prometheus/text_serializer.h"

namespace kforge {

MetricsServer::MetricsServer(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)), http_(std::make_unique<httplib::Server>()) {}

MetricsServer::~MetricsServer() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    std::string address, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) registry = std::make_shared<prometheus::Registry>();
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address '", address, "' is not HOST:PORT; use e.g. 0.0.0.0:9090 (port 0: any)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer(std::move(registry)));
  // httplib's default also sets SO_REUSEPORT, which would let a second server share a taken
  // port silently; a taken port must be an error.
  server->http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  std::weak_ptr<prometheus::Registry> weak = server->registry_;
  server->http_->Get("/metrics", [weak](const httplib::Request&, httplib::Response& response) {
    std::shared_ptr<prometheus::Registry> registry = weak.lock();
    if (registry == nullptr) return;
    response.set_content(prometheus::TextSerializer().Serialize(registry->Collect()),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  int bound = port == 0 ? server->http_->bind_to_any_port(host)
                        : (server->http_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot serve /metrics on ", address,
        ": the address is taken or not local; pick a free HOST:PORT for --metrics"));
  }
  server->port_ = bound;
  httplib::Server* http = server->http_.get();
  server->thread_ = ListenInBackground(*http);
  return server;
}

}  // namespace kforge
