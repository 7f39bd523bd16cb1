// GrpcServer on loopback: health, reflection, bearer-token auth (plaintext and TLS),
// /metrics and graceful shutdown, driven by real gRPC clients.
#include "common/grpc_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <atomic>
#include <cstdlib>

#include "common/status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "kforge/v1/proposer.grpc.pb.h"
#include "prometheus/counter.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kToken[] = "test-token-0123456789";

// A minimal real service: counts the calls its handler actually ran.
class FamiliesService final : public v1::ProposalService::Service {
 public:
  grpc::Status ListFamilies(grpc::ServerContext* context, const v1::ListFamiliesRequest*,
                            v1::ListFamiliesResponse* response) override {
    ++calls;
    // The token is consumed by the auth filter and never reaches handlers.
    if (context->client_metadata().count("authorization") != 0) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "handler saw the token");
    }
    response->add_families("softmax");
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

grpc::Status ListFamilies(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::ProposalService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListFamiliesResponse response;
  grpc::Status status = stub->ListFamilies(&context, {}, &response);
  if (status.ok() && (response.families_size() != 1 || response.families(0) != "softmax")) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "wrong response");
  }
  return status;
}

absl::StatusOr<HealthCheckResponse::ServingStatus> CheckHealth(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status();
}

// Lists services through server reflection (grpc.reflection.v1alpha). Debian ships the
// reflection messages compiled into libgrpc++_reflection but no header, so the messages are
// built from the generated descriptor pool and the bidi stream is driven generically.
absl::StatusOr<std::vector<std::string>> ListReflectedServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  namespace pb = google::protobuf;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const pb::Descriptor* request_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
  const pb::Descriptor* response_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  if (request_type == nullptr || response_type == nullptr) {
    return absl::InternalError("reflection messages are not linked in");
  }
  pb::MessageFactory* factory = pb::MessageFactory::generated_factory();
  std::unique_ptr<pb::Message> request(factory->GetPrototype(request_type)->New());
  request->GetReflection()->SetString(request.get(), request_type->FindFieldByName("list_services"),
                                      "*");
  std::string request_bytes = request->SerializeAsString();

  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&](auto start) {
    void* tag = nullptr;
    bool ok = false;
    start(reinterpret_cast<void*>(1));
    return cq.Next(&tag, &ok) && ok;
  };
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer out(&slice, 1), in;
  grpc::Status status;
  bool ok = step([&](void* tag) { call->StartCall(tag); }) &&
            step([&](void* tag) { call->Write(out, tag); }) &&
            step([&](void* tag) { call->WritesDone(tag); });
  bool read = ok && step([&](void* tag) { call->Read(&in, tag); });
  step([&](void* tag) { call->Finish(&status, tag); });
  cq.Shutdown();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!read) return absl::InternalError("no reflection response");

  std::vector<grpc::Slice> slices;
  (void)in.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::unique_ptr<pb::Message> response(factory->GetPrototype(response_type)->New());
  if (!response->ParseFromString(bytes)) return absl::InternalError("bad reflection response");
  const pb::Reflection* reflection = response->GetReflection();
  const pb::Message& list = reflection->GetMessage(
      *response, response_type->FindFieldByName("list_services_response"));
  const pb::FieldDescriptor* service_field = list.GetDescriptor()->FindFieldByName("service");
  std::vector<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, service_field); ++i) {
    const pb::Message& service = list.GetReflection()->GetRepeatedMessage(list, service_field, i);
    names.push_back(service.GetReflection()->GetString(
        service, service.GetDescriptor()->FindFieldByName("name")));
  }
  return names;
}

ClientOptions TokenOnly(std::string token) { return ClientOptions{"", std::move(token)}; }

std::string Target(const GrpcServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.auth_token = kToken;
    options.metrics_address = "127.0.0.1:0";
    auto server = GrpcServer::Create(options, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  FamiliesService service_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(GrpcServerTest, HealthIsServingWithoutAToken) {
  ASSERT_GT(server_->port(), 0);
  auto channel = MakeChannel(Target(*server_), {});
  EXPECT_EQ(*CheckHealth(channel, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(*CheckHealth(channel, "kforge.v1.ProposalService"), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel, "no.such.Service").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GrpcServerTest, BearerTokenIsRequired) {
  EXPECT_TRUE(ListFamilies(MakeChannel(Target(*server_), TokenOnly(kToken))).ok());
  EXPECT_EQ(service_.calls.load(), 1);

  grpc::Status missing = ListFamilies(MakeChannel(Target(*server_), {}));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << missing.error_message();
  EXPECT_NE(missing.error_message().find("authorization"), std::string::npos);
  grpc::Status wrong = ListFamilies(MakeChannel(Target(*server_), TokenOnly("wrong")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Rejected calls never reach the handler.
  EXPECT_EQ(service_.calls.load(), 1);
}

TEST_F(GrpcServerTest, ReflectionListsTheServices) {
  auto services = ListReflectedServices(MakeChannel(Target(*server_), TokenOnly(kToken)));
  ASSERT_TRUE(services.ok()) << services.status();
  for (const char* name : {"kforge.v1.ProposalService", "grpc.health.v1.Health",
                           "grpc.reflection.v1alpha.ServerReflection"}) {
    EXPECT_NE(std::find(services->begin(), services->end(), name), services->end()) << name;
  }
  EXPECT_EQ(ListReflectedServices(MakeChannel(Target(*server_), {})).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(GrpcServerTest, MetricsAreServed) {
  auto& family = prometheus::BuildCounter()
                     .Name("kforge_test_requests_total")
                     .Help("Requests seen by the test.")
                     .Register(*server_->registry());
  family.Add({}).Increment(3);
  ASSERT_GT(server_->metrics_port(), 0);
  httplib::Client client("127.0.0.1", server_->metrics_port());
  auto response = client.Get("/metrics");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_NE(response->body.find("kforge_test_requests_total 3"), std::string::npos)
      << response->body;
}

TEST_F(GrpcServerTest, ShutdownStopsServing) {
  auto channel = MakeChannel(Target(*server_), TokenOnly(kToken));
  ASSERT_TRUE(ListFamilies(channel).ok());
  server_->Shutdown(absl::Seconds(5));
  server_->Wait();  // returns at once after Shutdown
  server_->Shutdown();  // idempotent
  EXPECT_EQ(ListFamilies(channel).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(GrpcServerCreateTest, TakenPortsAreClearErrors) {
  ServerOptions first_options;
  first_options.address = "127.0.0.1:0";
  first_options.metrics_address = "127.0.0.1:0";
  auto first = GrpcServer::Create(first_options, {});
  ASSERT_TRUE(first.ok()) << first.status();

  ServerOptions same_port;
  same_port.address = Target(**first);
  auto second = GrpcServer::Create(same_port, {});
  EXPECT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(same_port.address), absl::string_view::npos)
      << second.status();

  ServerOptions same_metrics;
  same_metrics.address = "127.0.0.1:0";
  same_metrics.metrics_address = "127.0.0.1:" + std::to_string((*first)->metrics_port());
  auto third = GrpcServer::Create(same_metrics, {});
  EXPECT_EQ(third.status().code(), absl::StatusCode::kFailedPrecondition) << third.status();

  ServerOptions half_tls;
  half_tls.address = "127.0.0.1:0";
  half_tls.tls_cert_file = "/nonexistent/cert.pem";
  EXPECT_FALSE(GrpcServer::Create(half_tls, {}).ok());
}

TEST(GrpcServerTlsTest, TlsWithBearerToken) {
  TempDir dir;
  std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost -keyout " + key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl could not make a test certificate";

  FamiliesService service;
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  options.auth_token = kToken;
  auto server = GrpcServer::Create(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  std::string target = "localhost:" + std::to_string((*server)->port());

  EXPECT_TRUE(ListFamilies(MakeChannel(target, ClientOptions{cert, kToken})).ok());
  EXPECT_EQ(ListFamilies(MakeChannel(target, ClientOptions{cert, ""})).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A plaintext client cannot talk to a TLS server.
  EXPECT_EQ(ListFamilies(MakeChannel(target, TokenOnly(kToken))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // An unreadable CA file fails the calls instead of falling back to system roots.
  EXPECT_EQ(ListFamilies(MakeChannel(target, ClientOptions{(dir / "none.pem").string(), kToken}))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service.calls.load(), 1);
}

}  // namespace
}  // namespace kforge
