// `kforge optimize` end to end on this machine (no GPU): the tiny model is captured on the
// CPU, its targets get synthesizer candidates compiled with NVRTC, the run stops with the one
// GPU line and exit code 3, and --resume continues the same directory. Bad input: one line.
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kforge/v1/search.pb.h"
#include "tests/optimize/optimize_test_util.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using optimize_test::CommandResult;
using optimize_test::Kforge;
using optimize_test::Lines;
using optimize_test::Quote;
using optimize_test::ReadJson;
using optimize_test::ReadText;
using optimize_test::RunCommand;

class OptimizeCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string log;
    ASSERT_TRUE(optimize_test::MakeTinyModel(tmp_ / "model", "cpu", &log)) << log;
  }

  std::string Optimize(const fs::path& out, const std::string& extra) const {
    return Kforge() + " optimize " + Quote((tmp_ / "model" / "model.pt").string()) + " --inputs " +
           Quote((tmp_ / "model" / "inputs.pt").string()) + " --out " + Quote(out.string()) + " " +
           extra;
  }

  TempDir tmp_;
};

std::string LastLine(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  return lines.empty() ? "" : lines.back();
}

TEST_F(OptimizeCpuTest, CapturesCompilesStopsWithTheGpuLineAndResumes) {
  const fs::path out = tmp_ / "run";
  const std::string args = "--device cpu --top 3 --iterations 4 --seed 7";
  CommandResult first = RunCommand(Optimize(out, args), tmp_.path());
  ASSERT_EQ(first.exit_code, 3) << first.err << first.out;
  EXPECT_TRUE(first.out.empty()) << first.out;
  const std::string line = LastLine(first.err);
  EXPECT_EQ(line.rfind("kforge: validation and timing need a CUDA GPU; ", 0), 0u) << first.err;
  EXPECT_NE(line.find("results so far are in " + out.string() + "."), std::string::npos) << line;
  EXPECT_EQ(first.err.find("error"), std::string::npos) << first.err;

  // The capture.
  nlohmann::json profile = ReadJson(out / "profile.json");
  ASSERT_TRUE(profile.is_object()) << ReadText(out / "profile.json");
  // By default a chain is a target of its own: layer_norm -> relu is one, its calls leaving the
  // single ops' targets.
  std::set<std::string> captured_ops;
  for (const auto& t : profile["targets"]) {
    std::string chain;
    for (const auto& n : t["nodes"])
      chain += (chain.empty() ? "" : " -> ") + n["op"].get<std::string>();
    captured_ops.insert(chain);
  }
  EXPECT_EQ(captured_ops,
            (std::set<std::string>{"aten::softmax", "aten::layer_norm -> aten::relu"}))
      << profile["targets"].dump();
  EXPECT_TRUE(fs::exists(out / "capture" / "graph.json"));
  EXPECT_TRUE(fs::exists(out / "run.json"));

  // The report: every target has a family, was proposed for and compiled, not searched.
  nlohmann::json report = ReadJson(out / "report.json");
  ASSERT_TRUE(report.is_object()) << ReadText(out / "report.json");
  EXPECT_EQ(report["status"], "no_gpu");
  EXPECT_EQ(report["capture_device"], "cpu");
  ASSERT_EQ(report["targets"].size(), 2u) << report.dump(2);
  std::set<std::string> ops;
  int proposed = 0, compiled_ok = 0;
  std::map<std::string, std::string> trees;
  for (const auto& t : report["targets"]) {
    ops.insert(t["op"]);
    EXPECT_FALSE(t["family"].get<std::string>().empty()) << t.dump(2);
    EXPECT_FALSE(t["signature"].get<std::string>().empty());
    EXPECT_EQ(t["stop_reason"], "not_searched");
    EXPECT_EQ(t["iterations"], 0);
    ASSERT_EQ(t["compiled_candidates"].size(), 4u) << t.dump(2);
    int ok_here = 0;
    for (const auto& c : t["compiled_candidates"]) {
      ++proposed;
      if (c["compile_status"] == "COMPILE_OK") ++ok_here;
    }
    EXPECT_GE(ok_here, 1) << "no candidate of " << t["op"] << " compiled: " << t.dump(2);
    compiled_ok += ok_here;

    // The proposals wait in the tree as pending nodes for a GPU run to evaluate.
    const fs::path tree_path = out / t["tree"].get<std::string>();
    v1::SearchTreeState state;
    ASSERT_TRUE(state.ParseFromString(ReadText(tree_path))) << tree_path;
    ASSERT_EQ(state.nodes_size(), 5);
    for (int i = 1; i < state.nodes_size(); ++i) EXPECT_TRUE(state.nodes(i).pending());
    trees[tree_path.string()] = ReadText(tree_path);
  }
  EXPECT_EQ(ops, captured_ops);
  EXPECT_NE(line.find("proposed and compiled " + std::to_string(proposed) + " candidates (" +
                      std::to_string(compiled_ok) + " compiled cleanly)"),
            std::string::npos)
      << line;
  EXPECT_GE(report["compile"]["compiles"].get<int>(), proposed);

  // `kforge report --search` lists the proposals waiting in each tree.
  CommandResult history =
      RunCommand(Kforge() + " report " + Quote(out.string()) + " --search", tmp_.path());
  ASSERT_EQ(history.exit_code, 0) << history.err;
  size_t searches = 0;
  for (size_t at = 0;
       (at = history.out.find(": 4 dispatched, 0 evaluated\n", at)) != std::string::npos; ++at) {
    ++searches;
  }
  EXPECT_EQ(searches, 2u) << history.out;
  EXPECT_NE(history.out.find("     4      - pending"), std::string::npos) << history.out;
  CommandResult unknown = RunCommand(
      Kforge() + " report " + Quote(out.string()) + " --search --target nosuchid", tmp_.path());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--target nosuchid: no selected target"), std::string::npos)
      << unknown.err;

  // --resume reuses the capture and the trees: nothing is captured or proposed again, and
  // every compile comes from the cache.
  CommandResult resumed = RunCommand(Optimize(out, args + " --resume --json"), tmp_.path());
  ASSERT_EQ(resumed.exit_code, 3) << resumed.err << resumed.out;
  EXPECT_EQ(resumed.err.find("capturing"), std::string::npos) << resumed.err;
  EXPECT_EQ(LastLine(resumed.err), line);
  nlohmann::json printed = nlohmann::json::parse(resumed.out, nullptr, false);
  ASSERT_TRUE(printed.is_object()) << resumed.out;
  EXPECT_EQ(printed["status"], "no_gpu");
  EXPECT_EQ(printed["resumed"], true);
  EXPECT_EQ(printed["compile"]["compiles"], proposed);
  EXPECT_EQ(printed["compile"]["cache_hits"], proposed);
  for (const auto& [path, bytes] : trees) EXPECT_EQ(ReadText(path), bytes) << path;

  // Without --resume the directory is not overwritten.
  CommandResult again = RunCommand(Optimize(out, args), tmp_.path());
  EXPECT_EQ(again.exit_code, 2);
  ASSERT_EQ(Lines(again.err).size(), 1u) << again.err;
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;
}

TEST_F(OptimizeCpuTest, OpsPicksTheTargetsOfTheNamedOpsOnly) {
  // A chain qualifies when any of its nodes does; with --no-fuse the op's own target is picked.
  for (const auto& [flags, op] : {std::pair{"", "aten::layer_norm -> aten::relu"},
                                  std::pair{" --no-fuse", "aten::layer_norm"}}) {
    const fs::path out = tmp_ / (std::string("ops") + flags);
    CommandResult r = RunCommand(
        Optimize(out, std::string("--device cpu --top 3 --iterations 2 --seed 7 --ops layer_norm") +
                          flags),
        tmp_.path());
    ASSERT_EQ(r.exit_code, 3) << r.err << r.out;
    nlohmann::json report = ReadJson(out / "report.json");
    ASSERT_TRUE(report.is_object()) << ReadText(out / "report.json");
    ASSERT_EQ(report["targets"].size(), 1u) << report.dump(2);
    EXPECT_EQ(report["targets"][0]["op"], op) << flags;
  }

  // An op the model does not run: one line naming the flag and the ops it does run.
  CommandResult none =
      RunCommand(Optimize(tmp_ / "ops2", "--device cpu --ops aten::group_norm"), tmp_.path());
  EXPECT_EQ(none.exit_code, 2) << none.err;
  const std::string last = LastLine(none.err);
  EXPECT_NE(last.find("--ops aten::group_norm: no such op ran"), std::string::npos) << none.err;
  EXPECT_NE(last.find("aten::softmax"), std::string::npos) << last;
}

TEST_F(OptimizeCpuTest, BadInputGivesOneClearLine) {
  const std::string model = Quote((tmp_ / "model" / "model.pt").string());
  const std::string inputs = Quote((tmp_ / "model" / "inputs.pt").string());
  const std::string garbage = (tmp_ / "garbage.pt").string();
  { std::ofstream(garbage) << "not a model"; }
  struct Case {
    std::string args;
    int exit_code;
    std::string says;
    bool found_by_capture = false;
  };
  const std::string out = " --out " + Quote((tmp_ / "bad").string());
  const std::vector<Case> cases = {
      {Quote((tmp_ / "nope.pt").string()) + " --inputs " + inputs + out, 2, "no such file"},
      {model + " --inputs " + Quote((tmp_ / "nope.pt").string()) + out, 2, "--inputs"},
      {model + " --inputs " + inputs + out + " --top 0", 2, "--top must be at least 1"},
      {model + " --inputs " + inputs + out + " --iterations 0", 2, "--iterations"},
      {model + " --inputs " + inputs + out + " --proposer gpt", 2, "unknown --proposer 'gpt'"},
      {model + " --inputs " + inputs + out + " --time-budget soon", 2, "--time-budget"},
      {model + " --inputs " + inputs + out + " --gpus x", 2, "--gpus"},
      {model + " --inputs " + inputs + out + " --ops 'soft max'", 2, "is not an op name"},
      {model + " --inputs " + inputs + out + " --max-target-mib 0", 2, "--max-target-mib"},
      {model + " --inputs " + inputs + out + " --device tpu", 2, "unknown --device"},
      {model + " --inputs " + inputs + out + " --resume", 2, "holds no optimize run"},
      {Quote(garbage) + " --inputs " + inputs + " --out " + Quote((tmp_ / "bad2").string()) +
           " --device cpu",
       2, "garbage.pt is not a TorchScript model", /*found_by_capture=*/true},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCommand(Kforge() + " optimize " + c.args, tmp_.path());
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    // Input that only the capture can judge follows its "capturing ..." progress line.
    std::vector<std::string> lines = Lines(r.err);
    ASSERT_EQ(lines.size(), c.found_by_capture ? 2u : 1u) << c.args << "\n" << r.err;
    EXPECT_EQ(lines.back().rfind("kforge optimize: error: ", 0), 0u) << lines.back();
    EXPECT_NE(lines.back().find(c.says), std::string::npos) << c.args << "\n" << lines.back();
  }

  // An LLM proposer without a key fails before the capture, naming the variable to set.
  CommandResult llm = RunCommand(
      "env -u OPENAI_API_KEY -u KFORGE_LLM_BASE_URL -u KFORGE_LLM_API_KEY_FILE "
      "-u KFORGE_LLM_API_KEY_ENV -u KFORGE_LLM_BACKEND " +
          Kforge() + " optimize " + model + " --inputs " + inputs + " --out " +
          Quote((tmp_ / "llm").string()) + " --proposer openai --device cpu",
      tmp_.path());
  EXPECT_EQ(llm.exit_code, 1) << llm.err;
  std::vector<std::string> lines = Lines(llm.err);
  ASSERT_EQ(lines.size(), 1u) << llm.err;
  EXPECT_NE(lines[0].find("OPENAI_API_KEY"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace kforge
