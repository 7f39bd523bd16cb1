// Capturer as a library (family lookup, captured inputs in the store) and CaptureService over
// real gRPC on loopback, on the ResNet-50 example the fixture exports (CPU).
#include "services/capture/capture_service.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <filesystem>

#include "common/blob_store.h"
#include "common/grpc_server.h"
#include "common/store.h"
#include "common/tensor_io.h"
#include "gtest/gtest.h"
#include "kforge/v1/capture.grpc.pb.h"
#include "services/capture/capturer.h"
#include "tests/capture/capture_test_util.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
const fs::path kResnet = fs::path(CAPTURE_MODELS_DIR) / "resnet50";

std::string FamilyOf(const v1::Target& t) {
  return t.nodes(0).op() == "aten::batch_norm" ? "batch_norm" : "";
}

TEST(Capturer, TargetsCarryFamiliesAndTheirRealInputs) {
  TempDir dir;
  auto store = OpenStore("dir:" + (dir / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  CaptureOptions options;
  options.model_path = (kResnet / "model.pt").string();
  options.inputs_path = (kResnet / "inputs.pt").string();
  options.device = "cpu";
  options.warmup = 1;
  options.iters = 1;
  options.top_k = 200;  // every group
  auto result = Capturer::Run(options, store->get(), FamilyOf);
  ASSERT_TRUE(result.ok()) << result.status();
  const v1::OperatorProfile& p = result->profile;
  EXPECT_EQ(p.model_name(), "resnet50");
  EXPECT_EQ(p.targets_size(), p.ops_size());
  int batch_norms = 0;
  for (const v1::OpGroup& op : p.ops()) {
    EXPECT_EQ(op.family(), op.op() == "aten::batch_norm" ? "batch_norm" : "none");
  }
  for (const v1::Target& t : p.targets()) {
    if (t.nodes(0).op() == "aten::batch_norm") {
      ++batch_norms;
      EXPECT_EQ(t.family(), "batch_norm");
    }
    ASSERT_TRUE(t.has_captured_inputs()) << t.id();
    auto blob = GetBlob(**store, t.captured_inputs());
    ASSERT_TRUE(blob.ok()) << blob.status();
    auto tensors = ParseTensors(*blob, "captured inputs");
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ASSERT_EQ(static_cast<int>(tensors->size()), t.inputs_size());
    for (int i = 0; i < t.inputs_size(); ++i) {
      EXPECT_EQ((*tensors)[i].name, t.input_names(i));
      EXPECT_EQ((*tensors)[i].tensor.sizes().vec(),
                std::vector<int64_t>(t.inputs(i).sizes().begin(), t.inputs(i).sizes().end()));
      EXPECT_EQ((*tensors)[i].tensor.strides().vec(),
                std::vector<int64_t>(t.inputs(i).strides().begin(), t.inputs(i).strides().end()));
    }
    // Shape symbols follow docs/launch-plan.md.
    EXPECT_EQ(t.shape_symbols().at("in0_ndim"), t.inputs(0).sizes_size());
  }
  EXPECT_GT(batch_norms, 0);
}

TEST(Capturer, CapOnCapturedInputsIsReported) {
  CaptureOptions options;
  options.model_path = (kResnet / "model.pt").string();
  options.inputs_path = (kResnet / "inputs.pt").string();
  options.device = "cpu";
  options.warmup = 1;
  options.iters = 1;
  options.top_k = 2;
  options.max_target_input_bytes = 1024;  // smaller than any conv's inputs
  auto result = Capturer::Run(options, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->profile.targets_size(), 2);
  for (const auto& t : result->profile.targets()) EXPECT_FALSE(t.has_captured_inputs());
  int cap_notes = 0;
  for (const auto& note : result->profile.notes()) {
    cap_notes += note.find("cap per target; not kept") != std::string::npos;
  }
  EXPECT_EQ(cap_notes, 2);
  EXPECT_TRUE(result->target_inputs.empty());
}

TEST(CaptureService, CapturesModelFromStoreDigestsOverGrpc) {
  TempDir dir;
  auto store = OpenStore("dir:" + (dir / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  auto model = PutBlob(**store, capture_test::ReadWholeFile(kResnet / "model.pt"));
  auto inputs = PutBlob(**store, capture_test::ReadWholeFile(kResnet / "inputs.pt"));
  ASSERT_TRUE(model.ok() && inputs.ok());

  CaptureServiceImpl service(store->get());
  ServerOptions options;
  options.address = "127.0.0.1:0";
  auto server = GrpcServer::Create(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::CaptureService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*server)->port()), grpc::InsecureChannelCredentials()));

  v1::CaptureRequest request;
  *request.mutable_model() = *model;
  *request.mutable_inputs() = *inputs;
  request.set_device("cpu");
  request.set_warmup(1);
  request.set_iters(1);
  request.set_top_k(1);
  request.set_model_name("r50");
  v1::CaptureResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->Capture(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.profile().model_name(), "r50");
  ASSERT_EQ(response.profile().targets_size(), 1);
  EXPECT_TRUE(GetBlob(**store, response.profile().targets(0).captured_inputs()).ok());

  // A digest that is not in the store is NOT_FOUND, not a crash.
  v1::CaptureRequest bad = request;
  bad.mutable_model()->set_sha256(std::string(64, '0'));
  grpc::ClientContext context2;
  status = stub->Capture(&context2, bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace kforge
