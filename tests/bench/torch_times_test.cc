#include "tools/bench/torch_times.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge::bench {
namespace {

TEST(TorchTimes, ReadsOneLaunchAndGraphReplayTimesByRow) {
  TempDir dir;
  const std::string path = (dir / "times.json").string();
  std::ofstream(path) << R"({"rows": {
    "bn": {"eager_s": 6e-6, "compiled_s": {"default": 5e-6, "max-autotune-no-cudagraphs": 4.7e-6},
           "graph_compiled_s": {"default": 1.4e-6, "max-autotune-no-cudagraphs": 1.5e-6},
           "note": "n"},
    "big": {"eager_s": 9e-5, "compiled_s": {"default": 4e-5}}}})";
  auto times = ReadTorchTimes(path);
  ASSERT_TRUE(times.ok()) << times.status();
  ASSERT_EQ(times->size(), 2u);
  const TorchTimes& bn = times->at("bn");
  EXPECT_DOUBLE_EQ(FastestMode(bn.compiled_s), 4.7e-6);
  EXPECT_DOUBLE_EQ(FastestMode(bn.graph_compiled_s), 1.4e-6);
  EXPECT_EQ(bn.note, "n");
  EXPECT_TRUE(times->at("big").graph_compiled_s.empty());
  // A launch-bound winner (the worker's graph replays) against torch.compile's replays by its
  // replays on one input set, as the script times torch.compile's, and none without them; one
  // timed by events against one launch; without graph times, one launch either way.
  EXPECT_EQ(VsTorchCompile(&bn, 1.6e-6, "cuda_graph", 1.25e-6),
            "1.12× (graph replays, one input set)");
  EXPECT_EQ(VsTorchCompile(&bn, 1.6e-6, "cuda_graph", 0), "—");
  EXPECT_EQ(VsTorchCompile(&bn, 4.7e-6, "events", 0), "1.00×");
  EXPECT_EQ(VsTorchCompile(&times->at("big"), 5e-5, "cuda_graph", 4e-5), "0.80×");
  EXPECT_EQ(VsTorchCompile(nullptr, 5e-5, "events", 0), "—");
  EXPECT_EQ(VsTorchCompile(&bn, 0, "events", 0), "—");
}

TEST(TorchTimes, MissingOrForeignFilesAreClearErrors) {
  EXPECT_TRUE(ReadTorchTimes("")->empty());
  auto missing = ReadTorchTimes("/nonexistent/times.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::HasSubstr("run tools/bench/torch_compile_times.py first"));
  TempDir dir;
  const std::string path = (dir / "other.json").string();
  std::ofstream(path) << R"({"targets": []})";
  auto foreign = ReadTorchTimes(path);
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(std::string(foreign.status().message()), ::testing::HasSubstr("no \"rows\" object"));
}

}  // namespace
}  // namespace kforge::bench
