// Unit tests of tools/bench/sweep_details.h: shard arithmetic and reading back the details
// TSVs of earlier shard runs and calls (what --resume and --finish carry).
#include "tools/bench/sweep_details.h"

#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge::bench {
namespace {

using ::testing::HasSubstr;

TEST(Shard, ParsesIOfN) {
  auto s = ParseShard("1/2");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 2);
  for (const char* bad : {"2/2", "-1/2", "0/0", "1", "a/b", "0/2/3", ""}) {
    auto r = ParseShard(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--shard")) << bad;
  }
}

// Config texts shaped like Config::ToString's.
std::string ConfigText(size_t i) {
  return absl::StrCat("row_threads=", 1 << (i % 6), ";split=", i / 6 % 8, ";unroll=", i / 48,
                      ";vec=4");
}

TEST(Shard, ShardsPartitionEveryConfigExactlyOnce) {
  for (int n : {1, 2, 3, 8}) {
    std::vector<int> owners(1001, 0);
    std::vector<size_t> sizes(n, 0);
    for (int i = 0; i < n; ++i) {
      Shard s{i, n};
      for (size_t p = 0; p < owners.size(); ++p) {
        if (s.Contains(ConfigText(p))) {
          ++owners[p];
          ++sizes[i];
        }
      }
    }
    for (int o : owners) EXPECT_EQ(o, 1) << "n=" << n;
    const double even = static_cast<double>(owners.size()) / n;
    for (size_t z : sizes) EXPECT_NEAR(static_cast<double>(z), even, 0.25 * even) << "n=" << n;
  }
}

// Shard runs are separate processes (often on separate machines and builds): a config's shard
// must be a fixed function of its text. These values pin the hash; a per-process hash
// (absl::Hash) would break them.
TEST(Shard, AConfigsShardIsFixedByItsText) {
  int in_first_of_two = 0;
  for (size_t p = 0; p < 64; ++p) in_first_of_two += Shard{0, 2}.Contains(ConfigText(p)) ? 1 : 0;
  EXPECT_EQ(in_first_of_two, 38);
  EXPECT_TRUE((Shard{0, 2}.Contains("vec=4")));
}

TEST(DetailsFileName, NamesRowAndShard) {
  EXPECT_EQ(DetailsFileName("gn-bf16", Shard{}), "gn-bf16.tsv");
  EXPECT_EQ(DetailsFileName("gn-bf16", Shard{1, 2}), "gn-bf16.shard-1-of-2.tsv");
}

constexpr char kHeader[] =
    "config\tkernel\tcompile\tquick_verdict\tquick_us\treps\tpruned\tmax_normalized\tfull_"
    "verdict\tfull_us\tmessage\n";

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ReadFinishedDetails, MergesTheRowsFilesAndSkipsUnfinishedConfigs) {
  TempDir dir;
  Write(dir.path() / "gn.shard-0-of-2.tsv",
        std::string(kHeader) +
            "a=1\t0\tCOMPILE_OK\tPASS\t12.500\t5\t0\t0.25\t\t0.000\t\n"
            "a=3\t1\tCOMPILE_STATUS_UNSPECIFIED\tSKIPPED\t0.000\t0\t0\t0\t\t0.000\tdeadline\n"
            "a=5\t2\tCOMPILE_OK\tMISMATCH\t0.000\t0\t0\t9\t\t0.000\toutput 0: off\n");
  Write(dir.path() / "gn.shard-1-of-2.tsv",
        std::string(kHeader) + "a=2\t0\tCOMPILE_OK\tPASS\t30.000\t1\t1\t0.5\t\t0.000\t\n" +
            "a=4\t1\tCOMPILE_OK\tPA");  // cut short by a kill
  Write(dir.path() / "gn.tsv",
        std::string(kHeader) + "a=1\t0\tCOMPILE_OK\tPASS\t99.000\t5\t0\t0.25\tPASS\t11.0\t\n");
  Write(dir.path() / "gn-bf16.tsv", std::string(kHeader) +  // another row
                                        "a=9\t0\tCOMPILE_OK\tPASS\t1.000\t5\t0\t0\t\t0\t\n");
  auto read = ReadFinishedDetails(dir.path().string(), "gn");
  ASSERT_TRUE(read.ok()) << read.status();
  std::set<std::string> configs;
  for (const auto& [c, line] : *read) configs.insert(c);
  EXPECT_EQ(configs, (std::set<std::string>{"a=1", "a=2", "a=5"}));
  EXPECT_DOUBLE_EQ(read->at("a=2").quick_us, 30.0);
  EXPECT_TRUE(read->at("a=2").pruned);
  EXPECT_EQ(read->at("a=2").reps, 1);
  EXPECT_EQ(read->at("a=5").quick_verdict, "MISMATCH");
  EXPECT_EQ(read->at("a=5").message, "output 0: off");
  // The row's own file sorts first ("gn.shard-..." < "gn.tsv"): the first finished line wins.
  EXPECT_DOUBLE_EQ(read->at("a=1").quick_us, 12.5);
  EXPECT_EQ(read->at("a=1").kernel_sha256, "");  // a line of an older sweep: no digest
}

TEST(ReadFinishedDetails, ReadsTheKernelDigest) {
  TempDir dir;
  Write(dir.path() / "gn.tsv",
        std::string(kHeader).insert(std::string(kHeader).size() - 1, "\tkernel_sha256") +
            "a=1\t0\tCOMPILE_OK\tPASS\t12.500\t5\t0\t0.25\t\t0.000\t\tab12\n");
  auto read = ReadFinishedDetails(dir.path().string(), "gn");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at("a=1").kernel_sha256, "ab12");
}

TEST(ReadFinishedDetails, EmptyWithoutDirectoryAndErrorOnForeignFile) {
  auto none = ReadFinishedDetails("/nonexistent/kforge-details", "gn");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  TempDir dir;
  Write(dir.path() / "gn.tsv", "something else\n");
  auto bad = ReadFinishedDetails(dir.path().string(), "gn");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gn.tsv"));
}

TEST(EagerUs, RoundTripsAndAMissingFileSaysWhatToWrite) {
  TempDir dir;
  ASSERT_TRUE(WriteEagerUs(dir.path().string(), "gn", 251.9).ok());
  absl::StatusOr<double> read = ReadEagerUs(dir.path().string(), "gn");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_DOUBLE_EQ(*read, 251.9);
  absl::StatusOr<double> missing = ReadEagerUs(dir.path().string(), "softmax");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("softmax.eager-us"));
  Write(dir.path() / "bad.eager-us", "fast\n");
  EXPECT_FALSE(ReadEagerUs(dir.path().string(), "bad").ok());
}

TEST(IsFinalQuickVerdict, LeftOutConfigsAreNotFinal) {
  EXPECT_TRUE(IsFinalQuickVerdict("PASS"));
  EXPECT_TRUE(IsFinalQuickVerdict("COMPILE_ERROR"));
  EXPECT_TRUE(IsFinalQuickVerdict("CRASH"));
  EXPECT_FALSE(IsFinalQuickVerdict("SKIPPED"));
  EXPECT_FALSE(IsFinalQuickVerdict("NOT_EVALUATED"));
  EXPECT_FALSE(IsFinalQuickVerdict(""));
}

}  // namespace
}  // namespace kforge::bench
