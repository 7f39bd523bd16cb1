#include "common/serve_flags.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kforge {

void AddServeFlags(CLI::App* cmd, ServeFlags* flags, const std::string& default_listen,
                   const std::string& store_help) {
  flags->listen = default_listen;
  cmd->add_option("--listen", flags->listen, "gRPC address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--metrics", flags->metrics, "serve Prometheus /metrics on HOST:PORT");
  cmd->add_option("--store", flags->store_url, store_help);
  cmd->add_option("--tls-cert", flags->tls_cert, "TLS certificate (PEM); with --tls-key");
  cmd->add_option("--tls-key", flags->tls_key, "TLS private key (PEM)");
  cmd->add_option("--auth-token-env", flags->auth_token_env,
                  "require 'authorization: Bearer <token>' with the token from this "
                  "environment variable");
}

absl::StatusOr<ServerOptions> ToServerOptions(const ServeFlags& flags) {
  ServerOptions options;
  options.address = flags.listen;
  options.metrics_address = flags.metrics;
  options.tls_cert_file = flags.tls_cert;
  options.tls_key_file = flags.tls_key;
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together; pass both or neither");
  }
  if (!flags.auth_token_env.empty()) {
    const char* token = std::getenv(flags.auth_token_env.c_str());
    if (token == nullptr || *token == '\0') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth-token-env: $", flags.auth_token_env, " is not set; export the token there"));
    }
    options.auth_token = token;
  }
  return options;
}

namespace {
std::atomic<GrpcServer*> serving{nullptr};
}  // namespace

void ServeUntilSignal(GrpcServer& server) {
  serving = &server;
  auto on_signal = [](int) {
    if (GrpcServer* s = serving.load()) std::thread([s] { s->Shutdown(); }).detach();
  };
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  server.Wait();
  serving = nullptr;
}

}  // namespace kforge
