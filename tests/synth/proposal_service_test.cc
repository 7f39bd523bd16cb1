// Integration tests of the ProposalService over real gRPC on loopback (through GrpcServer and
// ProposalServiceClient), its metrics, and `kforge propose` on a capture-style target dir.
#include "services/proposer/proposal_service.h"

#include <fstream>
#include <sstream>

#include "common/grpc_server.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "services/proposer/proposer_cli.h"
#include "services/proposer/synth/synthesizer.h"
#include "tests/support/temp_dir.h"
#include "tests/synth/sample_targets.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

double Sample(prometheus::Registry& registry, const std::string& family, const std::string& key,
              const std::string& value) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& label : m.label) {
        if (label.name == key && label.value == value) {
          return f.type == prometheus::MetricType::Histogram
                     ? static_cast<double>(m.histogram.sample_count)
                     : m.counter.value;
        }
      }
    }
  }
  return -1;
}

v1::Target SampleTarget(const std::string& name) {
  for (const auto& s : synth::testing::SampleTargets(v1::FLOAT16)) {
    if (s.name == name) return s.target;
  }
  ADD_FAILURE() << name;
  return {};
}

class ProposalServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<Proposer>> proposers;
    proposers.push_back(std::make_unique<synth::Synthesizer>());
    service_ = std::make_unique<ProposalServiceImpl>(std::move(proposers), &registry_);
    ServerOptions options;
    options.address = "127.0.0.1:0";
    auto server = GrpcServer::Create(options, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<ProposalServiceClient>(
        MakeChannel("127.0.0.1:" + std::to_string(server_->port()), {}));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  prometheus::Registry registry_;
  std::unique_ptr<ProposalServiceImpl> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<ProposalServiceClient> client_;
};

TEST_F(ProposalServiceTest, ProposesOverGrpcLikeTheSynthesizerItself) {
  v1::ProposeRequest request;
  *request.mutable_target() = SampleTarget("layer_norm_affine");
  request.set_n(5);
  request.set_seed(3);
  auto remote = client_->Propose(request);
  ASSERT_TRUE(remote.ok()) << remote.status();
  synth::Synthesizer local;
  auto direct = local.Propose(request);
  ASSERT_TRUE(direct.ok());
  ASSERT_EQ(remote->candidates_size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(remote->candidates(i).id(), direct->candidates(i).id());
    EXPECT_EQ(remote->candidates(i).proposer(), "synth:rowwise");
  }
  EXPECT_EQ(Sample(registry_, "kforge_proposals_total", "proposer", "synth"), 5);
  EXPECT_EQ(Sample(registry_, "kforge_proposal_duration_seconds", "proposer", "synth"), 1);
}

TEST_F(ProposalServiceTest, ListsFamilies) {
  auto families = client_->ListFamilies();
  ASSERT_TRUE(families.ok()) << families.status();
  EXPECT_THAT(*families, ::testing::ElementsAre("rowwise", "group_norm", "batch_norm", "pooling",
                                                "reduction", "elementwise", "layout"));
}

TEST_F(ProposalServiceTest, UnknownProposerIsInvalidArgumentNamingTheAvailableOnes) {
  v1::ProposeRequest request;
  *request.mutable_target() = SampleTarget("relu");
  request.set_proposer("gpt-9");
  auto response = client_->Propose(request);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(), HasSubstr("unknown proposer 'gpt-9'"));
  EXPECT_THAT(response.status().message(), HasSubstr("synth"));
}

TEST_F(ProposalServiceTest, RefusalComesBackAndIsCounted) {
  v1::ProposeRequest request;
  *request.mutable_target() = SampleTarget("relu");
  request.mutable_target()->mutable_nodes(0)->set_op("aten::conv2d");
  auto response = client_->Propose(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates_size(), 0);
  EXPECT_THAT(response->refusal(), HasSubstr("aten::conv2d"));
  EXPECT_EQ(Sample(registry_, "kforge_proposal_rejections_total", "reason", "NO_FAMILY"), 1);
}

// Writes `target` as a capture does: DIR/targets/<id>/target.json.
std::string WriteTarget(const TempDir& dir, const v1::Target& target) {
  const std::filesystem::path target_dir = dir / "targets" / target.id();
  std::filesystem::create_directories(target_dir);
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(target, &json).ok());
  std::ofstream(target_dir / "target.json") << json;
  return target_dir.string();
}

TEST(ProposeCliTest, PrintsFamilyParamsPriorAndPlan) {
  TempDir dir;
  v1::Target target = SampleTarget("softmax_last");
  target.set_id("abc123def");
  const std::string target_dir = WriteTarget(dir, target);
  ProposeArgs args;
  args.target = target_dir;
  args.n = 3;
  std::ostringstream out, err;
  ASSERT_EQ(RunPropose(args, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("aten::softmax.int  family rowwise"));
  EXPECT_THAT(out.str(), HasSubstr("[3] synth:rowwise"));
  EXPECT_THAT(out.str(), HasSubstr("prior "));
  EXPECT_THAT(out.str(), HasSubstr("row_threads="));
  EXPECT_THAT(out.str(), HasSubstr("plan: {\"let\""));

  // By id prefix under --capture, as JSON.
  ProposeArgs by_id;
  by_id.target = "abc1";
  by_id.capture_dir = dir.str();
  by_id.n = 2;
  by_id.json = true;
  std::ostringstream json_out, json_err;
  ASSERT_EQ(RunPropose(by_id, json_out, json_err), 0) << json_err.str();
  v1::ProposeResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json_out.str(), &response).ok());
  EXPECT_EQ(response.candidates_size(), 2);
}

// A target of a capture on the CPU (README's step 2 without a GPU): proposed for as the CUDA
// kernels written for it will see it, as kforge optimize does.
TEST(ProposeCliTest, ACpuCapturesTargetIsProposedForItsCudaKernels) {
  TempDir dir;
  v1::Target target = SampleTarget("relu");
  target.set_id("cpu0");
  for (auto* sig : {target.mutable_inputs(0), target.mutable_outputs(0)}) sig->set_device("cpu");
  ProposeArgs args;
  args.target = WriteTarget(dir, target);
  args.n = 1;
  std::ostringstream out, err;
  ASSERT_EQ(RunPropose(args, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("family elementwise"));
}

TEST(ProposeCliTest, MissingInvalidAndUncoveredTargetsFailClearly) {
  TempDir dir;
  ProposeArgs args;
  args.target = (dir / "nope").string();
  args.capture_dir = dir.str();
  std::ostringstream out, err;
  EXPECT_EQ(RunPropose(args, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("no target"));

  std::filesystem::create_directories(dir / "bad");
  std::ofstream(dir / "bad" / "target.json") << "{not json";
  args.target = (dir / "bad").string();
  err.str("");
  EXPECT_EQ(RunPropose(args, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("is not a kforge.v1.Target"));

  v1::Target conv = SampleTarget("relu");
  conv.set_id("conv");
  conv.mutable_nodes(0)->set_op("aten::conv2d");
  args.target = WriteTarget(dir, conv);
  err.str("");
  EXPECT_EQ(RunPropose(args, out, err), 3);
  EXPECT_THAT(err.str(), HasSubstr("no synthesizer family covers aten::conv2d"));
}

}  // namespace
}  // namespace kforge
