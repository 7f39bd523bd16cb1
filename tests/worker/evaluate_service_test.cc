// EvaluateService over real gRPC on loopback: the real Compiler (NVRTC), a local-directory
// store holding the captured inputs and the evaluation cache, and fake-evaluator-child (a
// test double of the GPU child) in place of kforge-evaluator, since this machine has no GPU.
#include "services/worker/evaluate_service.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <memory>

#include "common/blob_store.h"
#include "common/grpc_server.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "kforge/v1/worker.grpc.pb.h"
#include "prometheus/registry.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/worker_test_targets.h"

namespace kforge {
namespace {

constexpr char kKernel[] = R"(#include "kforge_device.h"
// BEHAVIOUR
extern "C" __global__ void kf_copy(KfArgs args) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < args.outputs[0].numel) {
    ((float*)args.outputs[0].data)[i] = ((const float*)args.inputs[0].data)[i];
  }
}
)";
constexpr char kPlan[] =
    R"json({"launches": [{"entry": "kf_copy", "grid": ["ceil_div(in0_numel, 256)"], "block": [256]}]})json";

class EvaluateServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + dir_.str());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, store_.get());
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = *std::move(compiler);
    EvaluatorOptions options;
    options.evaluator_path = KFORGE_FAKE_EVALUATOR_CHILD;
    absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(options);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    evaluator_ = *std::move(evaluator);
    pipeline_ = std::make_unique<EvaluationPipeline>(compiler_.get(), evaluator_.get(),
                                                     store_.get());
    service_ = std::make_unique<EvaluateServiceImpl>(pipeline_.get(), evaluator_.get(),
                                                     registry_.get());
    ServerOptions server_options;
    server_options.address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<GrpcServer>> server =
        GrpcServer::Create(server_options, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::EvaluateService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  v1::EvaluateRequest Request(const std::string& behaviour) {
    v1::EvaluateRequest request;
    *request.mutable_target() = testing::SoftmaxTarget(4, 8);
    absl::StatusOr<v1::Digest> inputs = PutBlob(*store_, "captured tensor bytes");
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    *request.mutable_target()->mutable_captured_inputs() = *inputs;
    std::string source = kKernel;
    source.replace(source.find("BEHAVIOUR"), 9, "fake:" + behaviour);
    request.mutable_candidate()->set_source(source);
    request.mutable_candidate()->set_launch_plan_json(kPlan);
    *request.mutable_policy() = DefaultValidationPolicy();
    request.mutable_policy()->set_time_limit_s(5);
    request.set_timing(true);
    return request;
  }

  double Counter(const std::string& name, const std::string& verdict = "") {
    for (const auto& family : registry_->Collect()) {
      if (family.name != name) continue;
      for (const auto& metric : family.metric) {
        bool match = verdict.empty();
        for (const auto& label : metric.label) {
          if (label.name == "verdict" && label.value == verdict) match = true;
        }
        if (match) return metric.counter.value;
      }
    }
    return 0;
  }

  TempDir dir_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<Store> store_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<EvaluationPipeline> pipeline_;
  std::unique_ptr<EvaluateServiceImpl> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::EvaluateService::Stub> stub_;
};

TEST_F(EvaluateServiceTest, EvaluatesFetchesInputsAndCachesTheResult) {
  v1::EvaluationResult first, second;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Evaluate(&context, Request("pass"), &first).ok());
  }
  EXPECT_EQ(first.verdict(), v1::PASS) << first.diagnostics().message();
  // The child got the captured inputs fetched from the store.
  EXPECT_NE(first.diagnostics().message().find("inputs=21"), std::string::npos)
      << first.diagnostics().message();
  EXPECT_EQ(first.cache_key().rfind("eval/", 0), 0u);
  EXPECT_EQ(first.resources().entry_point(), "kf_copy");
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Evaluate(&context, Request("pass"), &second).ok());
  }
  // Served from the evaluation cache: the child's call counter did not move.
  EXPECT_EQ(second.diagnostics().message(), first.diagnostics().message());
  EXPECT_EQ(Counter("kforge_evaluations_total", "pass"), 2);

  // A re-confirmation bypasses the cache and runs in a fresh child.
  v1::EvaluateRequest fresh = Request("pass");
  fresh.set_fresh_process(true);
  v1::EvaluationResult third;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Evaluate(&context, fresh, &third).ok());
  EXPECT_TRUE(third.reconfirmed());
  EXPECT_NE(third.diagnostics().message(), first.diagnostics().message());
}

TEST_F(EvaluateServiceTest, TimeoutAndRestartAreCountedAndTheWorkerStaysUp) {
  v1::EvaluationResult hung, next;
  {
    grpc::ClientContext context;
    v1::EvaluateRequest request = Request("hang");
    request.mutable_policy()->set_time_limit_s(0.5);
    ASSERT_TRUE(stub_->Evaluate(&context, request, &hung).ok());
  }
  EXPECT_EQ(hung.verdict(), v1::TIMEOUT);
  EXPECT_EQ(Counter("kforge_evaluations_total", "timeout"), 1);
  EXPECT_EQ(Counter("kforge_evaluator_restarts_total"), 1);
  EXPECT_GT(Counter("kforge_gpu_busy_seconds_total"), 0);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Evaluate(&context, Request("pass"), &next).ok());
  }
  EXPECT_EQ(next.verdict(), v1::PASS);
}

TEST_F(EvaluateServiceTest, CompileErrorIsAVerdictWithTheLog) {
  v1::EvaluateRequest request = Request("pass");
  request.mutable_candidate()->set_source(
      "#include \"kforge_device.h\"\nextern \"C\" __global__ void kf_copy(KfArgs args) { "
      "undefined_thing = 1; }\n");
  v1::EvaluationResult result;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Evaluate(&context, request, &result).ok());
  EXPECT_EQ(result.verdict(), v1::COMPILE_ERROR);
  EXPECT_NE(result.diagnostics().log_excerpt().find("undefined_thing"), std::string::npos)
      << result.diagnostics().log_excerpt();
}

TEST_F(EvaluateServiceTest, MissingInputsAreNotEvaluated) {
  v1::EvaluateRequest request = Request("pass");
  request.mutable_target()->mutable_captured_inputs()->set_sha256(std::string(64, 'a'));
  v1::EvaluationResult result;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Evaluate(&context, request, &result).ok());
  EXPECT_EQ(result.verdict(), v1::NOT_EVALUATED);
  EXPECT_NE(result.diagnostics().message().find("captured inputs"), std::string::npos);
}

TEST_F(EvaluateServiceTest, RequestWithoutTargetIsInvalidArgument) {
  v1::EvaluateRequest request = Request("pass");
  request.clear_target();
  v1::EvaluationResult result;
  grpc::ClientContext context;
  grpc::Status status = stub_->Evaluate(&context, request, &result);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("target"), std::string::npos);
}

TEST_F(EvaluateServiceTest, GetGpuInfoListsTheChildsGpu) {
  v1::GetGpuInfoResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetGpuInfo(&context, v1::GetGpuInfoRequest(), &response).ok());
  ASSERT_EQ(response.gpus_size(), 1);
  EXPECT_EQ(response.gpus(0).name(), "FakeGpu (test double)");
}

TEST(EvaluationCacheKeyTest, DependsOnWhatDecidesTheVerdictOnly) {
  v1::CompileResult compiled;
  compiled.set_cubin("cubin bytes");
  v1::EvaluateRequest request;
  *request.mutable_target() = testing::SoftmaxTarget(4, 8);
  *request.mutable_policy() = DefaultValidationPolicy();
  std::string key = EvaluationPipeline::CacheKey(compiled, request, "H200");
  EXPECT_EQ(key, EvaluationPipeline::CacheKey(compiled, request, "H200"));
  v1::EvaluateRequest stats_changed = request;
  stats_changed.mutable_target()->set_share(0.5);  // capture statistics do not matter
  EXPECT_EQ(key, EvaluationPipeline::CacheKey(compiled, stats_changed, "H200"));
  EXPECT_NE(key, EvaluationPipeline::CacheKey(compiled, request, "A100"));
  v1::EvaluateRequest policy = request;
  policy.mutable_policy()->set_random_input_sets(5);
  EXPECT_NE(key, EvaluationPipeline::CacheKey(compiled, policy, "H200"));
  v1::EvaluateRequest shape = request;
  shape.mutable_target()->mutable_inputs(0)->set_sizes(0, 5);
  EXPECT_NE(key, EvaluationPipeline::CacheKey(compiled, shape, "H200"));
  v1::CompileResult other = compiled;
  other.set_cubin("other cubin");
  EXPECT_NE(key, EvaluationPipeline::CacheKey(other, request, "H200"));
}

}  // namespace
}  // namespace kforge
