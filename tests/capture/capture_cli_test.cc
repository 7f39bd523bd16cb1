// `kforge capture` end to end: exports the example models (fixture), runs the built kforge
// binary on them and checks the op table, coverage, graph and captured targets; and that each
// bad input gives one clear line and a nonzero exit. Built twice: for the CPU (label
// integration) and with KFORGE_CAPTURE_GPU for --device cuda (label gpu).
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_join.h"
#include "common/blob_store.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/capture/capture_test_util.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using capture_test::CommandResult;
using capture_test::Quote;
using capture_test::ReadWholeFile;
using capture_test::RunCommand;
using nlohmann::json;

#ifdef KFORGE_CAPTURE_GPU
constexpr char kDevice[] = "cuda";
constexpr int kResnetBatch = 32;
constexpr int kQwenSeq = 512;
#else
constexpr char kDevice[] = "cpu";
constexpr int kResnetBatch = 1;
constexpr int kQwenSeq = 128;
#endif

const fs::path kModels = CAPTURE_MODELS_DIR;

CommandResult Capture(const std::string& model, const std::string& extra, const TempDir& dir) {
  const fs::path m = kModels / model;
  return RunCommand(capture_test::Kforge() + " capture " + Quote((m / "model.pt").string()) +
                        " --inputs " + Quote((m / "inputs.pt").string()) + " --device " + kDevice +
                        " " + extra,
                    dir.path());
}

// calls per forward by operator, summed over signatures
std::map<std::string, int64_t> CallsByOp(const json& profile) {
  std::map<std::string, int64_t> calls;
  for (const auto& op : profile["ops"])
    calls[op["op"]] += std::stoll(op["calls"].get<std::string>());
  return calls;
}

std::vector<int64_t> SizesOf(const json& sig) {
  std::vector<int64_t> sizes;
  for (const auto& s : sig["sizes"]) sizes.push_back(std::stoll(s.get<std::string>()));
  return sizes;
}

bool HasOpWithInputs(const json& profile, const std::string& op,
                     const std::vector<std::vector<int64_t>>& inputs) {
  for (const auto& g : profile["ops"]) {
    if (g["op"] != op || g["inputs"].size() < inputs.size()) continue;
    bool match = true;
    for (size_t i = 0; i < inputs.size(); ++i) match &= SizesOf(g["inputs"][i]) == inputs[i];
    if (match) return true;
  }
  return false;
}

TEST(CaptureCli, ResNet50OpTableGraphAndTargets) {
  TempDir dir;
  const fs::path out = dir / "r50";
  auto r = Capture("resnet50", "--warmup 1 --iters 3 --top 3 --out " + Quote(out.string()), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("coverage"), std::string::npos) << r.out;

  json profile = json::parse(ReadWholeFile(out / "profile.json"));
  auto calls = CallsByOp(profile);
  // torch.jit.trace records convolutions as aten::_convolution.
  EXPECT_EQ(calls["aten::_convolution"], 53);
  EXPECT_EQ(calls["aten::batch_norm"], 53);
  EXPECT_EQ(calls["aten::adaptive_avg_pool2d"], 1);
  EXPECT_EQ(calls["aten::linear"], 1);
  EXPECT_TRUE(HasOpWithInputs(profile, "aten::adaptive_avg_pool2d", {{kResnetBatch, 2048, 7, 7}}));
  EXPECT_TRUE(HasOpWithInputs(profile, "aten::linear", {{kResnetBatch, 2048}, {1000, 2048}}));

  // Shares are fractions of the same profiled forward, so they add up to the coverage.
  double shares = 0;
  for (const auto& op : profile["ops"]) shares += op["share"].get<double>();
  const double coverage = profile["coverage"].get<double>();
  EXPECT_NEAR(shares, coverage, 1e-9);
  EXPECT_GT(coverage, 0.5);
  EXPECT_LE(coverage, 1.0 + 1e-9);
  EXPECT_GT(profile["forward_time_s"].get<double>(), 0);
#ifdef KFORGE_CAPTURE_GPU
  // On the GPU the table accounts for nearly all of the forward's device time.
  EXPECT_GE(coverage, 0.9) << ReadWholeFile(out / "summary.txt");
  EXPECT_EQ(profile["device"], "cuda:0");
#endif

  // Operator graph: the inlined trace, with observed shapes on its aten nodes.
  json graph = json::parse(ReadWholeFile(out / "graph.json"));
  int convs = 0, observed = 0;
  for (const auto& n : graph["nodes"]) {
    if (n["kind"] == "aten::_convolution") {
      ++convs;
      observed += n.contains("observed_inputs");
    }
  }
  EXPECT_EQ(convs, 53);
  EXPECT_EQ(observed, 53);
  EXPECT_GT(graph["edges"].size(), 100u);

  // Targets: the three hottest groups, each with the real inputs of one call.
  ASSERT_EQ(profile["targets"].size(), 3u);
  auto store = OpenStore("dir:" + (out / "store").string());
  ASSERT_TRUE(store.ok()) << store.status();
  double last_share = 1;
  for (const auto& t : profile["targets"]) {
    const std::string id = t["id"];
    EXPECT_EQ(id.size(), 64u);
    EXPECT_LE(t["share"].get<double>(), last_share);
    last_share = t["share"].get<double>();
    EXPECT_GT(std::stoll(t["min_bytes_moved"].get<std::string>()), 0);
    // One op, or a chain led by one (by default; on the GPU batch_norm -> add_ -> relu_ is
    // among the hottest), whose family is its anchor's. The synthesizer covers batch_norm and
    // pooling; no family covers convolutions.
    ASSERT_GE(t["nodes"].size(), 1u);
    const std::string op = t["nodes"][0]["op"];
    if (op == "aten::_convolution") {
      EXPECT_EQ(t["family"], "") << op;
    } else if (op == "aten::batch_norm") {
      EXPECT_EQ(t["family"], "batch_norm") << op;
    }
    EXPECT_FALSE(t["nodes"][0]["schema"].get<std::string>().empty());
    EXPECT_TRUE(fs::exists(out / "targets" / id / "target.json"));
    const std::string file = ReadWholeFile(out / "targets" / id / "inputs.pt");
    ASSERT_FALSE(file.empty());
    v1::Digest digest;
    digest.set_sha256(t["captured_inputs"]["sha256"]);
    digest.set_size_bytes(std::stoll(t["captured_inputs"]["size_bytes"].get<std::string>()));
    auto blob = GetBlob(**store, digest);
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_EQ(*blob, file);
  }
}

TEST(CaptureCli, Qwen3ListsSoftmaxAndLinearWithShapes) {
  TempDir dir;
  auto r = Capture("qwen3", "--warmup 1 --iters 2 --top 2 --json", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json profile = json::parse(r.out);
  // 8 heads, hidden 512, intermediate 1536 (examples/qwen3.py).
  EXPECT_TRUE(HasOpWithInputs(profile, "aten::softmax", {{1, 8, kQwenSeq, kQwenSeq}}))
      << r.out.substr(0, 4000);
  EXPECT_TRUE(HasOpWithInputs(profile, "aten::linear", {{1, kQwenSeq, 512}, {1536, 512}}));
  auto calls = CallsByOp(profile);
  EXPECT_EQ(calls["aten::softmax"], 4);         // one per layer
  EXPECT_GE(calls["aten::linear"], 4 * 7 + 1);  // q k v o gate up down per layer + lm head
  EXPECT_FALSE(profile["graph_json"].get<std::string>().empty());
  // The scores' scaling by head_dim ** -0.5, a traced Python number: a 0-dim f64 constant of
  // the graph.
  bool scaling = false;
#ifdef KFORGE_CAPTURE_GPU
  // The module loads onto the GPU with its constants, so there the scaling is a 0-dim device
  // tensor the op reads (an input, which the elementwise family reads as a device scalar).
  for (const auto& op : profile["ops"]) {
    if (op["op"] == "aten::mul" && op["inputs"].size() == 2 &&
        SizesOf(op["inputs"][0]) == std::vector<int64_t>{1, 8, kQwenSeq, kQwenSeq} &&
        SizesOf(op["inputs"][1]).empty() && op["inputs"][1]["dtype"] == "FLOAT64") {
      scaling = true;
    }
  }
#else
  // On the CPU it is a host value: recorded by value as the scalar `other`, not as a tensor
  // input, and grouped by it.
  for (const auto& op : profile["ops"]) {
    if (op["op"] != "aten::mul" || !op.contains("scalars")) continue;
    for (const auto& a : op["scalars"]) {
      if (a["name"] == "other" && a["scalar"].value("float_value", 0.0) == 0.125) {
        scaling = true;
        EXPECT_EQ(op["inputs"].size(), 1u) << op.dump();
        EXPECT_NE(op["signature"].get<std::string>().find(", f64[]=0.125"), std::string::npos)
            << op.dump();
      }
    }
  }
#endif
  std::string muls;
  for (const auto& op : profile["ops"]) {
    if (op["op"] == "aten::mul") muls += op["signature"].get<std::string>() + "\n";
  }
  EXPECT_TRUE(scaling) << "the muls captured:\n" << muls;
}

// Qwen3's RMSNorm, written out as pow -> mean -> add -> rsqrt -> mul, is a chain target the
// reduction family writes (its mean broadcast back over the row).
TEST(CaptureCli, Qwen3sWrittenOutRmsNormIsAReductionChainTarget) {
  TempDir dir;
  auto r = Capture("qwen3", "--warmup 1 --iters 2 --top 40 --json", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json profile = json::parse(r.out);
  std::string chains;
  int rms_norms = 0;
  for (const auto& t : profile["targets"]) {
    std::vector<std::string> ops;
    for (const auto& n : t["nodes"]) ops.push_back(n["op"].get<std::string>());
    if (ops.size() < 2) continue;
    chains += absl::StrJoin(ops, " -> ") + " (" + t.value("family", "") + ")\n";
    const std::vector<std::string> rms = {"aten::pow", "aten::mean", "aten::add", "aten::rsqrt",
                                          "aten::mul"};
    if (ops.size() >= rms.size() && std::equal(rms.begin(), rms.end(), ops.begin())) {
      ++rms_norms;
      EXPECT_EQ(t.value("family", ""), "reduction") << t.dump();
      // pow and the mul read one hidden state: one input, which the kernel reads once.
      auto self_of = [&](int node) {
        for (const auto& a : t["nodes"][node]["args"]) {
          if (a.value("name", "") == "self") return a.value("tensor", "");
        }
        return std::string();
      };
      EXPECT_EQ(self_of(0), "in0") << t.dump();
      EXPECT_EQ(self_of(4), "in0") << t.dump();
    }
  }
  EXPECT_GE(rms_norms, 1) << "the chain targets:\n" << chains;
}

#ifndef KFORGE_CAPTURE_GPU

// One clear line on stderr, nonzero exit, no LibTorch stack dump.
void ExpectOneLineError(const CommandResult& r, const std::string& expected) {
  EXPECT_NE(r.exit_code, 0);
  auto lines = capture_test::Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("kforge capture: error: "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(expected), std::string::npos) << lines[0];
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
}

std::string KforgeCapture(const std::string& model, const std::string& inputs,
                          const std::string& extra = "--device cpu") {
  return capture_test::Kforge() + " capture " + Quote(model) + " --inputs " + Quote(inputs) +
         " --warmup 1 --iters 1 " + extra;
}

class CaptureBadInput : public ::testing::Test {
 protected:
  std::string Model() const { return (kModels / "resnet50" / "model.pt").string(); }
  std::string Inputs() const { return (kModels / "resnet50" / "inputs.pt").string(); }
  std::string WriteInputs(const std::string& name, const std::string& python_value) {
    const std::string path = (dir_ / name).string();
    auto r =
        RunCommand(capture_test::Python() + " -c " +
                       Quote("import sys, torch; torch.save(" + python_value + ", sys.argv[1])") +
                       " " + Quote(path),
                   dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  CommandResult Run(const std::string& command) { return RunCommand(command, dir_.path()); }
  TempDir dir_;
};

TEST_F(CaptureBadInput, MissingModelFile) {
  const std::string missing = (dir_ / "nope.pt").string();
  ExpectOneLineError(Run(KforgeCapture(missing, Inputs())), missing + " does not exist");
}

TEST_F(CaptureBadInput, ModelThatIsNotTorchScript) {
  ExpectOneLineError(Run(KforgeCapture(Inputs(), Inputs())), "is not a TorchScript model");
}

TEST_F(CaptureBadInput, MissingInputsFile) {
  const std::string missing = (dir_ / "no_inputs.pt").string();
  ExpectOneLineError(Run(KforgeCapture(Model(), missing)), missing + " does not exist");
}

TEST_F(CaptureBadInput, InputsThatAreNotTensors) {
  const std::string path = (dir_ / "garbage.pt").string();
  std::ofstream(path) << "not a tensor file";
  ExpectOneLineError(Run(KforgeCapture(Model(), path)), "is not a torch.save file of tensors");
}

TEST_F(CaptureBadInput, WrongNumberOfInputs) {
  const std::string path = WriteInputs("two.pt", "(torch.randn(1,3,224,224), torch.randn(1))");
  ExpectOneLineError(Run(KforgeCapture(Model(), path)), "forward takes 1 (x)");
}

TEST_F(CaptureBadInput, WrongInputShape) {
  const std::string path = WriteInputs("gray.pt", "(torch.randn(1,1,32,32),)");
  auto r = Run(KforgeCapture(Model(), path));
  ExpectOneLineError(r, "rejected the inputs");
  EXPECT_NE(r.err.find("channels"), std::string::npos) << r.err;  // the model's own message
}

TEST_F(CaptureBadInput, CudaWithoutGpu) {
  if (fs::exists("/dev/nvidia0") || fs::exists("/dev/nvidiactl")) {
    GTEST_SKIP() << "this machine has a GPU";
  }
  ExpectOneLineError(Run(KforgeCapture(Model(), Inputs(), "--device cuda")),
                     "no CUDA device is available on this machine; use --device cpu");
}

TEST_F(CaptureBadInput, UnreachableRedisStore) {
  const int port = FreeLoopbackPort();  // nothing listens there
  ExpectOneLineError(
      Run(KforgeCapture(Model(), Inputs(),
                        "--device cpu --store redis://127.0.0.1:" + std::to_string(port))),
      "store redis://127.0.0.1:" + std::to_string(port));
}

#endif  // KFORGE_CAPTURE_GPU

}  // namespace
}  // namespace kforge
