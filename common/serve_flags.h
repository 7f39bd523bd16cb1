// The flags every `kforge serve NAME` command shares (address, metrics, store, TLS, bearer
// token) and the signal-driven run loop, so each service's command only adds its own.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/grpc_server.h"

namespace kforge {

struct ServeFlags {
  std::string listen;
  std::string metrics;
  std::string store_url;
  std::string tls_cert, tls_key;
  std::string auth_token_env;
};

// Adds --listen (default `default_listen`), --metrics, --store, --tls-cert, --tls-key and
// --auth-token-env to `cmd`.
void AddServeFlags(CLI::App* cmd, ServeFlags* flags, const std::string& default_listen,
                   const std::string& store_help);

// ServerOptions from the flags (with --metrics as metrics_address); the bearer token is read from the named environment variable
// (never from the command line, where `ps` would show it).
absl::StatusOr<ServerOptions> ToServerOptions(const ServeFlags& flags);

// Blocks until SIGINT or SIGTERM, then shuts the server down gracefully.
void ServeUntilSignal(GrpcServer& server);

}  // namespace kforge
