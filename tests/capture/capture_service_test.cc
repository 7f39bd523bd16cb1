// Capturer as a library (family lookup, captured inputs in the store, chain targets) and
// CaptureService over real gRPC on loopback, on the ResNet-50 example the fixture exports and a
// model of chains (CPU).
#include "services/capture/capture_service.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <filesystem>
#include <map>

#include "common/blob_store.h"
#include "common/grpc_server.h"
#include "common/store.h"
#include "common/tensor_io.h"
#include "gtest/gtest.h"
#include "kforge/v1/capture.grpc.pb.h"
#include "services/capture/capturer.h"
#include "services/worker/reference.h"
#include "tests/capture/capture_test_util.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
const fs::path kResnet = fs::path(CAPTURE_MODELS_DIR) / "resnet50";

std::string FamilyOf(const v1::Target& t) {
  return t.nodes(0).op() == "aten::batch_norm" ? "batch_norm" : "";
}

// The fixture's ResNet-50, profiled once on the CPU.
CaptureOptions ResnetOnCpu() {
  CaptureOptions options;
  options.model_path = (kResnet / "model.pt").string();
  options.inputs_path = (kResnet / "inputs.pt").string();
  options.device = "cpu";
  options.warmup = 1;
  options.iters = 1;
  return options;
}

TEST(Capturer, TargetsCarryFamiliesAndTheirRealInputs) {
  TempDir dir;
  auto store = OpenStore("dir:" + (dir / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  CaptureOptions options = ResnetOnCpu();
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

// ResNet-50's time is mostly convolutions: with uncovered_top_k, --top counts the targets a
// family covers, and only the uncovered ones ranked above the last of those come beside them.
TEST(Capturer, TopKCanCountCoveredTargetsOnly) {
  CaptureOptions options = ResnetOnCpu();
  options.fuse = false;
  options.top_k = 3;
  auto every = Capturer::Run(options, nullptr, FamilyOf);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(every->profile.targets_size(), 3);

  options.uncovered_top_k = 2;
  auto covered = Capturer::Run(options, nullptr, FamilyOf);
  ASSERT_TRUE(covered.ok()) << covered.status();
  int batch_norms = 0, others = 0;
  double lowest_covered = 1;
  for (const v1::Target& t : covered->profile.targets()) {
    if (t.family() == "batch_norm") {
      ++batch_norms;
      lowest_covered = std::min(lowest_covered, t.share());
    } else {
      ++others;
    }
  }
  EXPECT_EQ(batch_norms, 3);
  EXPECT_EQ(others, 2);  // convolutions outrank every batch norm on the CPU
  for (const v1::Target& t : covered->profile.targets()) {
    if (t.family().empty()) {
      EXPECT_GE(t.share(), lowest_covered) << t.nodes(0).op();
    }
  }
}

TEST(Capturer, CapOnCapturedInputsIsReported) {
  CaptureOptions options = ResnetOnCpu();
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

// The families the synthesizer's registry gives these ops and their chains (the capture
// library does not link the synthesizer): a chain's is its one other op's family, else
// elementwise; the layout family (upsample_nearest2d) writes single ops only.
std::string ChainFamilyOf(const v1::Target& t) {
  std::string family = "elementwise";
  for (const v1::SubgraphNode& node : t.nodes()) {
    const std::string& op = node.op();
    if (op == "aten::softmax") {
      family = "rowwise";
    } else if (op == "aten::batch_norm") {
      family = "batch_norm";
    } else if (op == "aten::upsample_nearest2d" && t.nodes_size() == 1) {
      family = "layout";
    } else if (op != "aten::mul" && op != "aten::add" && op != "aten::relu_" &&
               op != "aten::sigmoid") {
      return "";
    }
  }
  return family;
}

std::vector<std::string> OpsOf(const v1::Target& t) {
  std::vector<std::string> ops;
  for (const v1::SubgraphNode& n : t.nodes()) ops.push_back(n.op());
  return ops;
}

// A fused capture on the CPU of the model tests/capture/SCRIPT writes into DIR/model.
CaptureOptions FusedCaptureOf(const TempDir& dir, const std::string& script) {
  CommandResult made = RunCommand(Python() + " " + Quote(std::string(KFORGE_SOURCE_DIR) +
                                                          "/tests/capture/" + script) +
                                      " " + Quote((dir / "model").string()),
                                  dir.path());
  EXPECT_EQ(made.exit_code, 0) << made.err;
  CaptureOptions options;
  options.model_path = (dir / "model" / "model.pt").string();
  options.inputs_path = (dir / "model" / "inputs.pt").string();
  options.device = "cpu";
  options.warmup = 1;
  options.iters = 2;
  options.top_k = 20;
  options.fuse = true;
  return options;
}

TEST(Capturer, FuseMakesChainsTargetsWhoseReferenceIsTheModel) {
  TempDir dir;
  const CaptureOptions options = FusedCaptureOf(dir, "make_chain_model.py");
  auto store = OpenStore("dir:" + (dir / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  auto result = Capturer::Run(options, store->get(), ChainFamilyOf);
  ASSERT_TRUE(result.ok()) << result.status();
  const v1::OperatorProfile& p = result->profile;
  EXPECT_EQ(p.ops_size(), 10);  // the op table is per op and signature, chains or not

  std::map<std::vector<std::string>, const v1::Target*> by_ops;
  for (const v1::Target& t : p.targets()) by_ops[OpsOf(t)] = &t;
  const std::vector<std::string> softmax_chain = {"aten::mul", "aten::add", "aten::softmax"};
  const std::vector<std::string> bn_chain = {"aten::batch_norm", "aten::relu_", "aten::add"};
  ASSERT_TRUE(by_ops.count(softmax_chain));
  ASSERT_TRUE(by_ops.count(bn_chain));
  // sigmoid feeds both operands of its mul, and relu_ writes the model's input: each stays a
  // target of its own, as does the mul after it. Ops whose every call is in a chain are not.
  EXPECT_TRUE(by_ops.count({"aten::sigmoid"}));
  EXPECT_TRUE(by_ops.count({"aten::relu_"}));
  EXPECT_FALSE(by_ops.count({"aten::softmax"}));
  EXPECT_FALSE(by_ops.count({"aten::batch_norm"}));
  EXPECT_EQ(p.targets_size(), 6);  // the two chains, sigmoid, relu_ and the two muls after them

  const v1::Target& chain = *by_ops[softmax_chain];
  EXPECT_EQ(chain.family(), "rowwise");
  EXPECT_EQ(chain.input_names_size(), 2);  // x and the mask; 0.125 is a number
  EXPECT_EQ(chain.nodes(1).args(0).tensor(), "v0");
  EXPECT_EQ(chain.nodes(2).args(0).tensor(), "v1");
  EXPECT_EQ(chain.calls_per_forward(), 1);
  double members = 0;  // mul, add and softmax: the ops whose first input is x's shape
  for (const v1::OpGroup& op : p.ops()) {
    if (op.signature().rfind("f32[2,4,64,64]", 0) == 0) members += op.mean_s();
  }
  EXPECT_NEAR(chain.eager_time_s(), members, members * 1e-6);

  // The captured inputs of the chain, run through its nodes, give the model's first output.
  auto outputs = ReadTensors((dir / "model" / "outputs.pt").string());
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (const auto& [ops, output] : {std::pair{softmax_chain, 0}, std::pair{bn_chain, 1}}) {
    const v1::Target& t = *by_ops[ops];
    ASSERT_TRUE(t.has_captured_inputs()) << t.id();
    auto blob = GetBlob(**store, t.captured_inputs());
    ASSERT_TRUE(blob.ok()) << blob.status();
    auto tensors = ParseTensors(*blob, "captured inputs");
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ASSERT_EQ(static_cast<int>(tensors->size()), t.inputs_size());
    std::vector<at::Tensor> inputs;
    for (int i = 0; i < t.inputs_size(); ++i) {
      EXPECT_EQ((*tensors)[i].name, t.input_names(i));
      inputs.push_back((*tensors)[i].tensor);
    }
    auto runner = ReferenceRunner::Create(t);
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto got = runner->Run(inputs, ReferenceRunner::Precision::kNative);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_TRUE((*got)[0].allclose((*outputs)[output].tensor)) << t.id();
  }
}

TEST(Capturer, AChainNoFamilyWritesGivesUpItsLastNodes) {
  // x * 2.0 + 1.0 before an upsample: mul -> add -> upsample_nearest2d is no family's (layout
  // writes single ops only), so the chain stops before the upsample: the elementwise prologue
  // is one target, the upsample another, both searchable.
  TempDir dir;
  auto result = Capturer::Run(FusedCaptureOf(dir, "make_prologue_model.py"), nullptr,
                              ChainFamilyOf);
  ASSERT_TRUE(result.ok()) << result.status();
  std::map<std::vector<std::string>, std::string> families;
  for (const v1::Target& t : result->profile.targets()) families[OpsOf(t)] = t.family();
  EXPECT_EQ(families, (std::map<std::vector<std::string>, std::string>{
                          {{"aten::mul", "aten::add"}, "elementwise"},
                          {{"aten::upsample_nearest2d"}, "layout"}}));
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
