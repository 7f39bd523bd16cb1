// Integration test of CompileServiceImpl: a real gRPC server on loopback over a real
// Compiler, and the metrics it records.
#include "services/worker/compile_service.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

constexpr char kSource[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_fill(KfArgs args) {
  ((float*)args.outputs[0].data)[threadIdx.x] = (float)args.int_args[0];
}
)";

// Value of the sample of `family` whose label `key` is `value` (counter or histogram count).
double Sample(prometheus::Registry& registry, const std::string& family, const std::string& key,
              const std::string& value) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& metric : f.metric) {
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == key && label.value == value) {
          return f.type == prometheus::MetricType::Histogram
                     ? static_cast<double>(metric.histogram.sample_count)
                     : metric.counter.value;
        }
      }
    }
  }
  return -1;
}

TEST(CompileServiceTest, CompilesOverGrpcAndRecordsMetrics) {
  CompilerOptions options;
  options.child_path = KFORGE_NVRTC_CHILD;
  options.time_limit = absl::Seconds(120);
  auto compiler = Compiler::Create(options, nullptr);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  prometheus::Registry registry;
  CompileServiceImpl service(compiler->get(), &registry);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  auto stub = v1::CompileService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  v1::CompileRequest request;
  request.mutable_candidate()->set_source(kSource);
  request.mutable_candidate()->set_launch_plan_json(
      R"({"launches": [{"entry": "kf_fill", "grid": [1], "block": [32]}]})");
  request.mutable_options()->set_arch("sm_90");
  v1::CompileResult result;
  grpc::ClientContext context;
  grpc::Status status = stub->Compile(&context, request, &result);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  EXPECT_FALSE(result.cubin().empty());
  ASSERT_EQ(result.kernels_size(), 1);
  EXPECT_EQ(result.kernels(0).entry_point(), "kf_fill");

  // A refusal is data, not an RPC error.
  request.mutable_options()->add_extra_flags("--relocatable-device-code=true");
  v1::CompileResult refused;
  grpc::ClientContext context2;
  status = stub->Compile(&context2, request, &refused);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(refused.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(refused.log(), HasSubstr("relocatable device code"));

  EXPECT_EQ(Sample(registry, "kforge_compiles_total", "status", "ok"), 1);
  EXPECT_EQ(Sample(registry, "kforge_compiles_total", "status", "refused"), 1);
  EXPECT_EQ(Sample(registry, "kforge_compile_duration_seconds", "cache", "miss"), 2);
  server->Shutdown();
}

TEST(CompileServiceTest, StatusLabels) {
  EXPECT_STREQ(CompileStatusLabel(v1::COMPILE_OK), "ok");
  EXPECT_STREQ(CompileStatusLabel(v1::COMPILE_RESOURCE_LIMIT), "resource_limit");
  EXPECT_STREQ(CompileStatusLabel(v1::COMPILE_TIMEOUT), "timeout");
}

}  // namespace
}  // namespace kforge
