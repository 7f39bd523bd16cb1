// The exporter on real models (make_model_fixture.sh: ResNet-50 and the Qwen3 example, run by
// `kforge optimize --device cpu`, winners marked by SimulatedValidation): it rewrites exactly
// the graph nodes the capture observed with each winner's signature, whether or not the graph
// executor's optimizations are on (the capture turns them off for the whole `kforge optimize`
// process, whose export then saw forward's own nodes only: one batch_norm of ResNet-50's 53);
// without the capture's graph.json every node with the winner's constants lists every kernel;
// and an export with nothing to rewrite says why, also through the `kforge optimize` hook.
#include <sys/wait.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor_signature.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/export/export_cli.h"
#include "runtime/export/exporter.h"
#include "runtime/export/graph_rewrite.h"
#include "runtime/export/host_scalars.h"
#include "services/coordinator/embedded/run_directory.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const fs::path kFixtures = KFORGE_MODEL_FIXTURES_DIR;

std::string Slurp(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The graph executor's optimizations switched for one scope (the capture switches them off).
class ExecutorOptimize {
 public:
  explicit ExecutorOptimize(bool on) : before_(torch::jit::getGraphExecutorOptimize()) {
    torch::jit::setGraphExecutorOptimize(on);
  }
  ~ExecutorOptimize() { torch::jit::setGraphExecutorOptimize(before_); }

 private:
  bool before_;
};

// "f32[1,256,56,56] f32[256] ..." -> "f32[1,256,56,56]": the first input, which names the shape.
std::string FirstInput(const std::string& signature) { return signature.substr(0, signature.find(' ')); }

// Exported kernels by first input -> the nodes that call them.
std::map<std::string, int> NodesByShape(const ExportResult& r) {
  std::map<std::string, int> nodes;
  for (const ExportedKernel& k : r.kernels) nodes[absl::StrCat(k.op, " ", FirstInput(k.signature))] = k.nodes;
  return nodes;
}

void Walk(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& f) {
  for (torch::jit::Node* n : block->nodes()) {
    f(n);
    for (torch::jit::Block* b : n->blocks()) Walk(b, f);
  }
}

struct GraphCounts {
  int runs = 0;                  // kforge::run calls
  int kernel_ids = 0;            // kernel ids they list, all together
  std::map<std::string, int> op;  // aten nodes by kind, everywhere (fallback blocks included)
};

GraphCounts CountGraph(const fs::path& model_path) {
  torch::jit::Module model = torch::jit::load(model_path.string());
  GraphCounts c;
  Walk(model.get_method("forward").graph()->block(), [&](torch::jit::Node* n) {
    const std::string kind = n->kind().toQualString();
    ++c.op[kind];
    if (kind == "kforge::run") {
      ++c.runs;
      c.kernel_ids += static_cast<int>(n->input(2)->node()->inputs().size());
    }
  });
  return c;
}

absl::StatusOr<ExportResult> Export(const std::string& model, const fs::path& out, bool optimize) {
  ExecutorOptimize scope(optimize);
  ExportOptions options;
  options.run_dir = (kFixtures / model / "run").string();
  options.out_dir = out.string();
  return ExportBundle(options);
}

// ResNet-50 at batch 1: the shapes of the batch_norm winners on the H200 (there at batch 32).
// Expected node counts from the architecture, not from the capture: layer1 has bn3 in its 3
// blocks and the downsample's bn on 256x56x56 (4); layer2 bn3 in 4 blocks + downsample on
// 512x28x28 (5); layer3 bn3 in 6 blocks + downsample on 1024x14x14 (7).
const std::map<std::string, int> kResNetNodes = {
    {"aten::batch_norm f32[1,256,56,56]", 4},
    {"aten::batch_norm f32[1,512,28,28]", 5},
    {"aten::batch_norm f32[1,1024,14,14]", 7}};

// The Qwen3 example (4 layers): softmax of attention and silu of the MLP once per layer, two
// residual adds per layer, RMSNorm's mean over the hidden size twice per layer plus the final
// norm (the q/k norms' means are over head_dim, other shapes).
const std::map<std::string, int> kQwenNodes = {{"aten::softmax f32[1,8,32,32]", 4},
                                               {"aten::add f32[1,32,512]", 8},
                                               {"aten::silu f32[1,32,1536]", 4},
                                               {"aten::mean f32[1,32,512]", 9},
                                               {"aten::mul f32[1,8,32,32]", 4}};

TEST(RuntimeModelsTest, ResNet50RewritesEveryBatchNormObservedWithAWinnersShape) {
  for (bool optimize : {true, false}) {
    SCOPED_TRACE(optimize ? "graph executor optimizations on (kforge export)"
                          : "optimizations off, as the capture leaves kforge optimize");
    TempDir tmp;
    absl::StatusOr<ExportResult> r = Export("resnet50", tmp / "bundle", optimize);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(NodesByShape(*r), kResNetNodes);
    EXPECT_EQ(r->nodes_rewritten, 16);
    for (const std::string& note : r->notes) EXPECT_THAT(note, Not(HasSubstr("graph.json")));
    GraphCounts c = CountGraph(tmp / "bundle" / "model.pt");
    EXPECT_EQ(c.runs, 16);
    EXPECT_EQ(c.kernel_ids, 16);  // each node lists the one kernel of its shape
    EXPECT_EQ(c.op["aten::batch_norm"], 53);  // 37 untouched, 16 as the fallbacks
    EXPECT_EQ(c.op["prim::CallMethod"], 0);   // forward fully inlined
  }
}

TEST(RuntimeModelsTest, Qwen3RewritesEveryNodeObservedWithAWinnersSignature) {
  for (bool optimize : {true, false}) {
    SCOPED_TRACE(optimize ? "optimizations on" : "optimizations off");
    TempDir tmp;
    absl::StatusOr<ExportResult> r = Export("qwen3", tmp / "bundle", optimize);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(NodesByShape(*r), kQwenNodes);
    EXPECT_EQ(r->nodes_rewritten, 29);
    GraphCounts c = CountGraph(tmp / "bundle" / "model.pt");
    EXPECT_EQ(c.runs, 29);
    EXPECT_EQ(c.kernel_ids, 29);
  }
}

TEST(RuntimeModelsTest, TheFixtureBundlesAreTheOnesTheseTestsExpect) {
  // runtime_models_python_test.py runs these bundles; their counts are checked here.
  for (const auto& [model, expected] :
       std::vector<std::pair<std::string, std::map<std::string, int>>>{{"resnet50", kResNetNodes},
                                                                      {"qwen3", kQwenNodes}}) {
    SCOPED_TRACE(model);
    EXPECT_EQ(Slurp(kFixtures / model / "export.rc"), "0\n") << Slurp(kFixtures / model / "export.err");
    nlohmann::json j = nlohmann::json::parse(Slurp(kFixtures / model / "export.json"));
    std::map<std::string, int> nodes;
    for (const nlohmann::json& k : j["kernels"]) {
      nodes[absl::StrCat(k["op"].get<std::string>(), " ",
                         FirstInput(k["signature"].get<std::string>()))] = k["nodes"].get<int>();
    }
    EXPECT_EQ(nodes, expected);
  }
}

TEST(RuntimeModelsTest, WithoutTheCaptureGraphEveryNodeWithTheConstantsListsEveryKernel) {
  TempDir tmp;
  const fs::path run = tmp / "run";
  fs::copy(kFixtures / "resnet50" / "run", run, fs::copy_options::recursive);
  RunDirectory dir(run);
  absl::StatusOr<v1::OperatorProfile> profile = dir.ReadProfile();
  ASSERT_TRUE(profile.ok()) << profile.status();
  profile->clear_graph_json();
  ASSERT_TRUE(dir.WriteProfile(*profile).ok());
  fs::remove(dir.capture_dir() / "graph.json");
  ExecutorOptimize off(false);
  ExportOptions options;
  options.run_dir = run.string();
  options.out_dir = (tmp / "bundle").string();
  absl::StatusOr<ExportResult> r = ExportBundle(options);
  ASSERT_TRUE(r.ok()) << r.status();
  // Shapes are not in the saved graph's types: all 53 match every winner; the guards pick.
  EXPECT_EQ(r->nodes_rewritten, 53);
  for (const ExportedKernel& k : r->kernels) EXPECT_EQ(k.nodes, 53) << k.kernel_id;
  EXPECT_THAT(absl::StrJoin(r->notes, "\n"), HasSubstr("keeps no capture graph (graph.json)"));
  GraphCounts c = CountGraph(tmp / "bundle" / "model.pt");
  EXPECT_EQ(c.runs, 53);
  EXPECT_EQ(c.kernel_ids, 3 * 53);
}

// PlanRewrite itself, against captured targets.
class PlanRewriteOnResNet : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = torch::jit::load((kFixtures / "resnet50" / "model" / "model.pt").string());
    RunDirectory dir(kFixtures / "resnet50" / "run");
    absl::StatusOr<v1::OperatorProfile> p = dir.ReadProfile();
    ASSERT_TRUE(p.ok()) << p.status();
    profile_ = *p;
  }
  const v1::Target* Find(const std::string& op, const std::string& in0) {
    for (const v1::Target& t : profile_.targets()) {
      if (t.nodes(0).op() == op && absl::StrJoin(t.inputs(0).sizes(), ",") == in0) return &t;
    }
    return nullptr;
  }
  torch::jit::Module module_;
  v1::OperatorProfile profile_;
};

TEST_F(PlanRewriteOnResNet, EachNodeGetsOnlyTheKernelsOfTheSignaturesObservedThere) {
  // Every captured batch_norm target (12 shapes) at once: each of the 53 nodes gets one kernel.
  std::vector<RewriteKernel> kernels;
  for (const v1::Target& t : profile_.targets()) {
    if (t.nodes(0).op() == "aten::batch_norm") kernels.push_back({t.id(), t});
  }
  ASSERT_EQ(kernels.size(), 12u);
  absl::StatusOr<RewritePlan> plan = PlanRewrite(module_, kernels, profile_.graph_json());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->used_observations) << plan->note;
  EXPECT_EQ(plan->nodes.size(), 53u);
  int total = 0;
  for (const PlannedNode& p : plan->nodes) {
    EXPECT_EQ(p.kernel_ids.size(), 1u);
    EXPECT_EQ(p.inputs.size(), 5u);  // input, weight, bias, running mean and var
  }
  for (const auto& [id, n] : plan->nodes_per_kernel) total += n;
  EXPECT_EQ(total, 53);
  EXPECT_TRUE(plan->unmatched.empty());
}

TEST_F(PlanRewriteOnResNet, SaysWhyNoNodeComputesATarget) {
  const v1::Target* bn = Find("aten::batch_norm", "1,256,56,56");
  ASSERT_NE(bn, nullptr);
  v1::Target other_eps = *bn;  // the same call with eps 1e-3: no node has that constant
  for (v1::Argument& a : *other_eps.mutable_nodes(0)->mutable_args()) {
    if (a.name() == "eps") a.mutable_scalar()->set_float_value(1e-3);
  }
  v1::Target other_shape = *bn;  // a shape no batch_norm of this model was called with
  other_shape.mutable_inputs(0)->set_sizes(1, 320);
  v1::Target softmax = *bn;  // an operator the model does not have
  softmax.mutable_nodes(0)->set_op("aten::softmax");
  absl::StatusOr<RewritePlan> plan =
      PlanRewrite(module_, {{"eps", other_eps}, {"shape", other_shape}, {"softmax", softmax}},
                  profile_.graph_json());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->nodes.empty());
  EXPECT_THAT(plan->unmatched["eps"],
              HasSubstr("nodes the capture observed with the target's inputs (4 of 53) do not "
                        "take the target's scalar arguments as constants"));
  // ... and what differs at the first of them, by name.
  EXPECT_THAT(plan->unmatched["eps"], HasSubstr("at the first: aten::batch_norm: eps is "));
  EXPECT_THAT(plan->unmatched["eps"], HasSubstr(" there, 0.001 when captured"));
  EXPECT_THAT(plan->unmatched["shape"],
              HasSubstr("the capture observed none of its 53 aten::batch_norm nodes called with "
                        "the target's input signature"));
  EXPECT_EQ(plan->unmatched["softmax"], "the model's graph has no aten::softmax node");
}

TEST_F(PlanRewriteOnResNet, AGraphJsonOfAnotherModelIsNotUsed) {
  const v1::Target* bn = Find("aten::batch_norm", "1,256,56,56");
  ASSERT_NE(bn, nullptr);
  RunDirectory qwen(kFixtures / "qwen3" / "run");
  absl::StatusOr<v1::OperatorProfile> other = qwen.ReadProfile();
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<RewritePlan> plan = PlanRewrite(module_, {{"bn", *bn}}, other->graph_json());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->used_observations);
  EXPECT_THAT(plan->note, HasSubstr("does not describe this model's graph"));
  EXPECT_EQ(plan->nodes.size(), 53u);  // operator and constants only
}

TEST(PlanRewriteChainsTest, WhereTwoChainsEndAtOneNodeTheOneThatSavesMoreIsRewritten) {
  // The fused fixture's softmax(x * 0.125 + mask) beside its suffix add -> softmax, whose first
  // input is the mul's output (x's signature): both end at the softmax node, and that node
  // calls the kernel that saves more per call, whichever it is; the other is unmatched, why
  // said.
  const fs::path fixture = kFixtures / "fused";
  absl::StatusOr<v1::OperatorProfile> profile = RunDirectory(fixture / "run").ReadProfile();
  ASSERT_TRUE(profile.ok()) << profile.status();
  const v1::Target* chain = nullptr;
  for (const v1::Target& t : profile->targets()) {
    if (TargetOpName(t) == "aten::mul -> aten::add -> aten::softmax") chain = &t;
  }
  ASSERT_NE(chain, nullptr);
  v1::Target suffix = *chain;
  suffix.mutable_nodes()->DeleteSubrange(0, 1);
  const std::string mul_out = chain->nodes(0).outputs(0);
  suffix.set_input_names(0, mul_out);  // x itself is read by the mul only
  ASSERT_EQ(TargetOpName(suffix), "aten::add -> aten::softmax");

  for (const double long_saving : {2e-6, 1e-6}) {
    SCOPED_TRACE(long_saving);
    torch::jit::Module module = torch::jit::load((fixture / "model" / "model.pt").string());
    absl::StatusOr<RewritePlan> plan = PlanRewrite(
        module, {{"long", *chain, long_saving}, {"short", suffix, 1.5e-6}}, profile->graph_json());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->used_observations) << plan->note;
    const std::string winner = long_saving > 1.5e-6 ? "long" : "short";
    const std::string loser = winner == "long" ? "short" : "long";
    ASSERT_EQ(plan->nodes.size(), 1u);
    EXPECT_EQ(plan->nodes[0].kernel_ids, std::vector<std::string>{winner});
    EXPECT_EQ(plan->nodes[0].nodes.size(), winner == "long" ? 3u : 2u);
    EXPECT_EQ(plan->nodes_per_kernel.count(loser), 0u);
    EXPECT_THAT(plan->unmatched[loser], HasSubstr("a chain that ends there too and saves more"));
  }
}

TEST(RuntimeModelsTest, AnExportWithNothingToRewriteSaysWhyAlsoThroughTheOptimizeHook) {
  const fs::path fixture = kFixtures / "unmatched";
  EXPECT_EQ(Slurp(fixture / "export.rc"), "3\n");  // `kforge export`: nothing to export
  EXPECT_THAT(Slurp(fixture / "export.err"),
              HasSubstr("no node of the TorchScript graph computes this target"));
  TempDir tmp;
  const fs::path run = tmp / "run";
  fs::copy(fixture / "run", run, fs::copy_options::recursive);
  ExecutorOptimize off(false);
  absl::StatusOr<std::string> line = ExportAfterOptimize(run.string());
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(*line, StartsWith("nothing exported to " + (run / "export").string() + ": "));
  EXPECT_THAT(*line, HasSubstr("(aten::softmax): no node of the TorchScript graph computes this "
                               "target: its aten::softmax nodes the capture observed with the "
                               "target's inputs (1 of 1) do not take"));
  EXPECT_EQ(std::count(line->begin(), line->end(), '\n'), 1);
  EXPECT_EQ(line->back(), '\n');
  EXPECT_FALSE(fs::exists(run / "export"));
}

TEST(RuntimeModelsTest, ANodeThatConsumesARewrittenNodeTakesItsRewrittenResult) {
  // softmax(softmax(x)): rewriting the first replaces its output; the second's kforge::run
  // must take the first's prim::If result (before the fix it held the destroyed node's value).
  const fs::path fixture = kFixtures / "chained";
  ASSERT_EQ(Slurp(fixture / "export.rc"), "0\n") << Slurp(fixture / "export.err");
  nlohmann::json j = nlohmann::json::parse(Slurp(fixture / "export.json"));
  EXPECT_EQ(j["nodes_rewritten"], 2);
  torch::jit::Module model = torch::jit::load((fixture / "bundle" / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = model.get_method("forward").graph();
  graph->lint();
  std::vector<torch::jit::Node*> runs;
  Walk(graph->block(), [&](torch::jit::Node* n) {
    if (n->kind().toQualString() == std::string("kforge::run")) runs.push_back(n);
  });
  ASSERT_EQ(runs.size(), 2u);
  torch::jit::Node* second_inputs = runs[1]->input(3)->node();
  ASSERT_EQ(second_inputs->kind(), c10::prim::ListConstruct);
  ASSERT_EQ(second_inputs->inputs().size(), 1u);
  EXPECT_EQ(second_inputs->input(0)->node()->kind(), c10::prim::If);
  // The fallback of the second softmax takes the same value.
  torch::jit::Node* second_if = nullptr;
  for (torch::jit::Node* n = runs[1]->next(); n != nullptr && second_if == nullptr; n = n->next()) {
    if (n->kind() == c10::prim::If) second_if = n;
  }
  ASSERT_NE(second_if, nullptr);
  torch::jit::Node* fallback = *second_if->blocks()[0]->nodes().begin();
  EXPECT_EQ(fallback->input(0), second_inputs->input(0));
}

// The fixture's export rewrote one node, with one kernel computing the chain `op`.
void ExpectOneChainRewritten(const fs::path& fixture, const std::string& op) {
  ASSERT_EQ(Slurp(fixture / "export.rc"), "0\n") << Slurp(fixture / "export.err");
  nlohmann::json j = nlohmann::json::parse(Slurp(fixture / "export.json"));
  EXPECT_EQ(j["nodes_rewritten"], 1);
  ASSERT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["kernels"][0]["op"], op);
}

TEST(RuntimeModelsTest, AChainIsOneCallWhoseFallbackIsItsNodes) {
  // softmax(x * 0.125 + mask) captured with --fuse and exported: one kforge::run on x and the
  // mask, the fallback the three original nodes, and no mul, add or softmax left outside it.
  const fs::path fixture = kFixtures / "fused";
  ASSERT_NO_FATAL_FAILURE(ExpectOneChainRewritten(fixture, "aten::mul -> aten::add -> aten::softmax"));
  nlohmann::json manifest = nlohmann::json::parse(Slurp(fixture / "bundle" / "manifest.json"));
  EXPECT_EQ(manifest["kernels"][0]["chain"].size(), 3u);

  torch::jit::Module model = torch::jit::load((fixture / "bundle" / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = model.get_method("forward").graph();
  graph->lint();
  torch::jit::Node* run = nullptr;
  std::vector<std::string> top_level;
  for (torch::jit::Node* n : graph->nodes()) {
    top_level.push_back(n->kind().toQualString());
    if (top_level.back() == "kforge::run") run = n;
  }
  ASSERT_NE(run, nullptr);
  torch::jit::Node* inputs = run->input(3)->node();
  ASSERT_EQ(inputs->inputs().size(), 2u);
  EXPECT_EQ(inputs->input(0), graph->inputs()[1]);  // x
  EXPECT_EQ(inputs->input(1), graph->inputs()[2]);  // the mask
  EXPECT_EQ(std::count(top_level.begin(), top_level.end(), "aten::softmax"), 0);
  EXPECT_EQ(std::count(top_level.begin(), top_level.end(), "aten::add"), 1);  // b's + 1.0
  torch::jit::Node* branch = nullptr;
  for (torch::jit::Node* n = run->next(); n != nullptr && branch == nullptr; n = n->next()) {
    if (n->kind() == c10::prim::If) branch = n;
  }
  ASSERT_NE(branch, nullptr);
  std::vector<std::string> fallback;
  for (torch::jit::Node* n : branch->blocks()[0]->nodes()) fallback.push_back(n->kind().toQualString());
  EXPECT_EQ(fallback, (std::vector<std::string>{"aten::mul", "aten::add", "aten::softmax"}));
}

TEST(RuntimeModelsTest, ATensorTheChainReadsTwiceIsOneInputOfItsCall) {
  // x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight: pow and the first mul read x,
  // which the capture names once, so the one kforge::run takes x once, then the weight.
  const fs::path fixture = kFixtures / "rms_norm";
  ASSERT_NO_FATAL_FAILURE(ExpectOneChainRewritten(
      fixture, "aten::pow -> aten::mean -> aten::add -> aten::rsqrt -> aten::mul -> aten::mul"));
  torch::jit::Module model = torch::jit::load((fixture / "bundle" / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = model.get_method("forward").graph();
  graph->lint();
  torch::jit::Node* run = nullptr;
  for (torch::jit::Node* n : graph->nodes()) {
    if (n->kind().toQualString() == std::string("kforge::run")) run = n;
  }
  ASSERT_NE(run, nullptr);
  torch::jit::Node* inputs = run->input(3)->node();
  ASSERT_EQ(inputs->inputs().size(), 2u);
  EXPECT_EQ(inputs->input(0), graph->inputs()[1]);  // x, once
  EXPECT_NE(inputs->input(1), graph->inputs()[1]);  // the weight
}

TEST(RuntimeModelsTest, AReshapeWhoseSizesTheGraphComputesComparesThemOnEveryCall) {
  // repeat_kv's reshape takes sizes the graph reads from its input: the node is rewritten, and
  // its kforge::run takes a fifth argument, whether those sizes equal the captured [2,8,64,32].
  const fs::path fixture = kFixtures / "computed_shape";
  ASSERT_NO_FATAL_FAILURE(ExpectOneChainRewritten(fixture, "aten::reshape"));
  torch::jit::Module model = torch::jit::load((fixture / "bundle" / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = model.get_method("forward").graph();
  graph->lint();
  torch::jit::Node* run = nullptr;
  torch::jit::Node* reshape = nullptr;
  Walk(graph->block(), [&](torch::jit::Node* n) {
    const std::string kind = n->kind().toQualString();
    if (kind == "kforge::run") run = n;
    if (kind == "aten::reshape") reshape = n;  // the fallback's
  });
  ASSERT_NE(run, nullptr);
  ASSERT_NE(reshape, nullptr);
  ASSERT_EQ(run->inputs().size(), 5u);
  torch::jit::Node* flags = run->input(4)->node();
  ASSERT_EQ(flags->kind(), c10::prim::ListConstruct);
  ASSERT_EQ(flags->inputs().size(), 1u);  // one kernel
  torch::jit::Node* eq = flags->input(0)->node();
  EXPECT_EQ(eq->kind(), c10::aten::eq);
  EXPECT_EQ(eq->input(0), reshape->input(1));  // the sizes the graph computes
  // The saved model's code reloads the captured list as a list of constants.
  torch::jit::Node* captured = eq->input(1)->node();
  ASSERT_EQ(captured->kind(), c10::prim::ListConstruct);
  std::vector<int64_t> values;
  for (torch::jit::Value* v : captured->inputs()) values.push_back(torch::jit::toIValue(v)->toInt());
  EXPECT_EQ(values, (std::vector<int64_t>{2, 8, 64, 32}));
}

// The traced `x.shape[-1] // 2` of Qwen3's rotate_half (its 2 a 0-dim tensor constant, on the
// GPU for a model loaded there) and the size products of its reshapes are arithmetic read only
// on the host: each takes its constant as a number, and the logits stay the same.
TEST(HostScalarsTest, TheQwen3RotarySplitsDivisionTakesItsConstantAsANumber) {
  torch::jit::Module model =
      torch::jit::load((kFixtures / "qwen3" / "model" / "model.pt").string());
  const at::Tensor ids = at::arange(32, at::kLong).remainder(97).reshape({1, 32});
  const at::Tensor expected = model.forward({ids}).toTensor();
  torch::jit::Module rewritten =
      torch::jit::load((kFixtures / "qwen3" / "model" / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = rewritten.get_method("forward").graph();
  InlineAllCalls(*graph);
  // Two slices (x1, x2) of q and of k in each of the 4 layers, and two size products a layer.
  std::map<std::string, int> kinds;
  for (torch::jit::Node* n : HostScalarArithmetic(*graph)) {
    ++kinds[n->kind().toQualString()];
    EXPECT_EQ(n->input(0)->node()->kind(), c10::prim::NumToTensor);
    EXPECT_EQ(n->input(1)->node()->kind(), c10::prim::Constant);
    ASSERT_EQ(n->output()->uses().size(), 1u);
    EXPECT_EQ(n->output()->uses()[0].user->kind(), c10::aten::Int);
  }
  EXPECT_EQ(kinds, (std::map<std::string, int>{{"aten::floor_divide", 16}, {"aten::mul", 8}}));

  EXPECT_EQ(KeepScalarArithmeticOnHost(*graph), 24);
  graph->lint();
  int with_numbers = 0;
  Walk(graph->block(), [&](torch::jit::Node* n) {
    if (n->kind() != c10::aten::floor_divide && n->kind() != c10::aten::mul) return;
    if (n->input(0)->node()->kind() != c10::prim::NumToTensor) return;
    EXPECT_EQ(n->input(1)->type()->kind(), c10::TypeKind::IntType);
    ++with_numbers;
  });
  EXPECT_EQ(with_numbers, 24);
  EXPECT_TRUE(HostScalarArithmetic(*graph).size() == 24u);  // still host arithmetic
  EXPECT_EQ(KeepScalarArithmeticOnHost(*graph), 0);          // no tensor constant left to take
  EXPECT_TRUE(at::equal(rewritten.forward({ids}).toTensor(), expected));
}

// OP(x.size(1), c) read as an int, c a 0-dim tensor constant; `tensor_use` also multiplies x by
// the result as a tensor.
std::shared_ptr<torch::jit::Graph> SizeArithmetic(const std::string& op, const at::Tensor& c,
                                                  bool tensor_use = false) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(
      absl::StrCat(R"IR(
graph(%x : Tensor, %c : Tensor):
  %one : int = prim::Constant[value=1]()
  %s : int = aten::size(%x, %one)
  %t : Tensor = prim::NumToTensor(%s)
  %q : Tensor = )IR", op, R"IR((%t, %c)
  %i : int = aten::Int(%q)
)IR", tensor_use ? "  %y : Tensor = aten::mul(%x, %q)\n  return (%y, %i)\n" : "  return (%i)\n"),
      graph.get());
  torch::jit::WithInsertPoint at(graph->block()->nodes().front());
  graph->inputs()[1]->replaceAllUsesWith(graph->insertConstant(c));
  graph->eraseInput(1);
  return graph;
}

TEST(HostScalarsTest, ArithmeticAlsoUsedAsATensorIsLeftAsItIs) {
  const at::Tensor two = at::scalar_tensor(2, at::kLong);
  EXPECT_EQ(HostScalarArithmetic(*SizeArithmetic("aten::floor_divide", two)).size(), 1u);
  std::shared_ptr<torch::jit::Graph> used_as_tensor =
      SizeArithmetic("aten::floor_divide", two, /*tensor_use=*/true);
  EXPECT_TRUE(HostScalarArithmetic(*used_as_tensor).empty());
  EXPECT_EQ(KeepScalarArithmeticOnHost(*used_as_tensor), 0);
}

// A float64 constant promotes the result to float64 where a number would leave float32: it
// stays a tensor. A float32 one becomes a number, and so does an integer.
TEST(HostScalarsTest, OnlyConstantsWhoseNumbersPromoteAlikeBecomeNumbers) {
  EXPECT_EQ(KeepScalarArithmeticOnHost(
                *SizeArithmetic("aten::mul", at::scalar_tensor(0.5, at::kDouble))),
            0);
  std::shared_ptr<torch::jit::Graph> float32 =
      SizeArithmetic("aten::mul", at::scalar_tensor(0.5, at::kFloat));
  EXPECT_EQ(KeepScalarArithmeticOnHost(*float32), 1);
  float32->lint();
  std::shared_ptr<torch::jit::Graph> integer =
      SizeArithmetic("aten::floor_divide", at::scalar_tensor(2, at::kLong));
  EXPECT_EQ(KeepScalarArithmeticOnHost(*integer), 1);
  integer->lint();
  // The graph computes x.size(1) // 2 with the number: a 1x6 input gives 3.
  torch::jit::GraphFunction fn("f", integer, nullptr);
  EXPECT_EQ(fn({at::zeros({1, 6})}).toInt(), 3);
}

}  // namespace
}  // namespace kforge
