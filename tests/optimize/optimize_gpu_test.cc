// `kforge optimize` on a CUDA GPU (label gpu; runs on the H200 machine): the tiny model's
// targets each get at least one candidate that passes validation, the winners are re-confirmed
// and written out, and --resume continues the same trees.
#include <filesystem>
#include <map>
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
using optimize_test::Quote;
using optimize_test::ReadJson;
using optimize_test::ReadText;
using optimize_test::RunCommand;

TEST(OptimizeGpuTest, FindsAPassingKernelPerTargetAndWritesTheReport) {
  TempDir tmp;
  std::string log;
  ASSERT_TRUE(optimize_test::MakeTinyModel(tmp / "model", "cuda", &log)) << log;
  const fs::path out = tmp / "run";
  const std::string command = Kforge() + " optimize " +
                              Quote((tmp / "model" / "model.pt").string()) + " --inputs " +
                              Quote((tmp / "model" / "inputs.pt").string()) + " --out " +
                              Quote(out.string()) + " --device cuda --top 3 --seed 1";
  CommandResult r = RunCommand(command + " --iterations 8", tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("estimated end-to-end speedup"), std::string::npos) << r.out;

  nlohmann::json report = ReadJson(out / "report.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["status"], "complete");
  EXPECT_FALSE(report["gpu"].get<std::string>().empty());
  // softmax, and the chain layer_norm -> relu (a target of its own by default).
  ASSERT_EQ(report["targets"].size(), 2u) << report.dump(2);
  std::map<std::string, int> iterations;
  for (const auto& t : report["targets"]) {
    SCOPED_TRACE(t.dump(2));
    EXPECT_GE(t["iterations"].get<int>(), 1);
    EXPECT_LE(t["iterations"].get<int>(), 8);
    EXPECT_GE(t["verdict_counts"].value("PASS", 0), 1);
    ASSERT_FALSE(t["best_candidate_id"].get<std::string>().empty());
    EXPECT_EQ(t["best_proposer"].get<std::string>().rfind("synth:", 0), 0u);
    EXPECT_FALSE(t["best_params"].empty());
    EXPECT_TRUE(t["reconfirmed"].get<bool>());
    EXPECT_GT(t["speedup"].get<double>(), 0);
    EXPECT_GT(t["eager_s"].get<double>(), 0);
    EXPECT_GT(t["best_s"].get<double>(), 0);
    const fs::path kernel = out / t["kernel_dir"].get<std::string>();
    for (const char* name : {"kernel.cu", "plan.json", "candidate.json", "target.json", "cubin"}) {
      EXPECT_TRUE(fs::exists(kernel / name)) << kernel / name;
    }
    EXPECT_GT(fs::file_size(kernel / "cubin"), 0u);
    iterations[t["target_id"]] = t["iterations"];
  }

  // --resume with a larger budget continues the same trees: nothing is lost.
  CommandResult resumed = RunCommand(command + " --iterations 10 --resume", tmp.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  nlohmann::json again = ReadJson(out / "report.json");
  EXPECT_EQ(again["resumed"], true);
  for (const auto& t : again["targets"]) {
    EXPECT_GE(t["iterations"].get<int>(), iterations[t["target_id"]]) << t.dump(2);
    v1::SearchTreeState state;
    ASSERT_TRUE(state.ParseFromString(ReadText(out / t["tree"].get<std::string>())));
    EXPECT_GE(state.nodes_size() - 1, iterations[t["target_id"]]);
  }
}

}  // namespace
}  // namespace kforge
