// GrpcServer: ServerBuilder wiring plus bearer-token auth in gRPC's server auth filter.
#include "common/grpc_server.h"

#include <grpc/grpc_security.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/client_interceptor.h>
#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

// Debian's abseil has its own string_view type, not std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kHealthMethodPrefix = "/grpc.health.v1.Health/";

absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", Av(what), " ", path, "; pass a readable PEM file"));
  }
  return text.str();
}

// Bearer-token check run by gRPC core's server auth filter, before any handler or
// interceptor: the only place in gRPC C++ 1.51 that can reject a call outright.
class BearerTokenProcessor {
 public:
  explicit BearerTokenProcessor(std::string token) : expected_(absl::StrCat("Bearer ", token)) {}

  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                      size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
    auto* self = static_cast<BearerTokenProcessor*>(state);
    bool health_check = false;
    const grpc_metadata* authorization = nullptr;
    for (size_t i = 0; i < num_md; ++i) {
      std::string_view key = ToView(md[i].key);
      if (key == ":path") health_check = ToView(md[i].value).substr(0, kHealthMethodPrefix.size()) == kHealthMethodPrefix;
      if (key == "authorization") authorization = &md[i];
    }
    if (health_check || (authorization != nullptr && self->Matches(ToView(authorization->value)))) {
      // Consume the token so handlers never see (and never log) it.
      done(user_data, authorization, authorization != nullptr ? 1 : 0, nullptr, 0,
           GRPC_STATUS_OK, nullptr);
      return;
    }
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED,
         authorization == nullptr
             ? "missing 'authorization: Bearer <token>' metadata; pass the server's token"
             : "invalid bearer token");
  }
  static void Destroy(void* state) { delete static_cast<BearerTokenProcessor*>(state); }

 private:
  static std::string_view ToView(const grpc_slice& slice) {
    return std::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                            GRPC_SLICE_LENGTH(slice));
  }
  bool Matches(std::string_view presented) const {
    return presented.size() == expected_.size() &&
           CRYPTO_memcmp(presented.data(), expected_.data(), expected_.size()) == 0;
  }

  const std::string expected_;
};

// Server credentials built from gRPC core's C API: unlike grpc::InsecureServerCredentials
// (which aborts on SetAuthMetadataProcessor), core credentials take an auth metadata
// processor whether or not they use TLS.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  CoreServerCredentials() = default;  // the base constructor initializes gRPC
  ~CoreServerCredentials() override {
    if (creds_ != nullptr) grpc_server_credentials_release(creds_);
  }

  absl::Status Init(const ServerOptions& options) {
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS needs both a certificate and a key file; pass both --tls_cert and --tls_key "
          "or neither");
    }
    if (options.tls_cert_file.empty()) {
      creds_ = grpc_insecure_server_credentials_create();
    } else {
      auto cert = ReadPemFile(options.tls_cert_file, "TLS certificate");
      if (!cert.ok()) return cert.status();
      auto key = ReadPemFile(options.tls_key_file, "TLS private key");
      if (!key.ok()) return key.status();
      grpc_ssl_pem_key_cert_pair pair{key->c_str(), cert->c_str()};
      creds_ = grpc_ssl_server_credentials_create_ex(
          nullptr, &pair, 1, GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, nullptr);
      if (creds_ == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("cannot use TLS certificate ",
                                                       options.tls_cert_file, " with key ",
                                                       options.tls_key_file));
      }
    }
    if (!options.auth_token.empty()) {
      grpc_server_credentials_set_auth_metadata_processor(
          creds_, {&BearerTokenProcessor::Process, &BearerTokenProcessor::Destroy,
                   new BearerTokenProcessor(options.auth_token)});
    }
    return absl::OkStatus();
  }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    spdlog::error("CoreServerCredentials: set the auth token through ServerOptions instead");
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* creds_ = nullptr;
};

// Captures the full names of the registered services: grpc::Service does not expose its
// name, but server builder plugins see the list (this is how reflection gets it).
class ServiceNamesPlugin final : public grpc::ServerBuilderPlugin {
 public:
  explicit ServiceNamesPlugin(std::vector<std::string>* names) : names_(names) {}
  std::string name() override { return "kforge_service_names"; }
  void InitServer(grpc::ServerInitializer* /*si*/) override {}
  void Finish(grpc::ServerInitializer* si) override { *names_ = *si->GetServiceList(); }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}

 private:
  std::vector<std::string>* names_;
};

class ServiceNamesOption final : public grpc::ServerBuilderOption {
 public:
  explicit ServiceNamesOption(std::vector<std::string>* names) : names_(names) {}
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ServiceNamesPlugin>(names_));
  }

 private:
  std::vector<std::string>* names_;
};

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string header_;
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(
    const ServerOptions& options, std::vector<grpc::Service*> services) {
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->registry_ =
      options.registry ? options.registry : std::make_shared<prometheus::Registry>();
  if (!options.metrics_address.empty()) {
    auto metrics = MetricsServer::Create(options.metrics_address, server->registry_);
    if (!metrics.ok()) return metrics.status();
    server->metrics_ = std::move(*metrics);
  }

  auto credentials = std::make_shared<CoreServerCredentials>();
  if (absl::Status status = credentials->Init(options); !status.ok()) return status;

  // Both are process-wide switches read when a ServerBuilder is constructed.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Without this a second server on a taken port would silently share it (SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.address, credentials, &server->port_);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetOption(std::make_unique<ServiceNamesOption>(&server->service_names_));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot serve gRPC on ", options.address,
                     " (address in use or invalid?); pick a free HOST:PORT"));
  }
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  for (const std::string& name : server->service_names_) health->SetServingStatus(name, true);
  spdlog::info("gRPC serving on port {} ({}{}){}", server->port_,
               options.tls_cert_file.empty() ? "plaintext" : "TLS",
               options.auth_token.empty() ? "" : ", bearer token required",
               server->metrics_ ? absl::StrCat(", /metrics on port ", server->metrics_->port())
                                : "");
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

void GrpcServer::Shutdown(absl::Duration deadline) {
  std::call_once(shutdown_once_, [&] {
    if (server_ == nullptr) return;  // Create failed before the server started
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
    server_->Wait();
    metrics_.reset();
  });
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls_ca_file.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto ca = ReadPemFile(options.tls_ca_file, "TLS CA certificate");
    if (ca.ok()) {
      ssl.pem_root_certs = *ca;
    } else {
      // Without the CA the handshake fails, so calls report UNAVAILABLE.
      spdlog::error("{}", ca.status().ToString());
      ssl.pem_root_certs = "invalid";
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!options.auth_token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(options.auth_token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials, grpc::ChannelArguments(), std::move(interceptors));
}

}  // namespace kforge
