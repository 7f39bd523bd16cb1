// Unit tests of tools/bench/kernel_batch.h: entry discovery, the batched program's renaming,
// macro hygiene and plan rewriting, and the canonical PTX used to compare compiles.
#include "tools/bench/kernel_batch.h"

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kforge::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSource[] = R"(// a config
#include "kforge_device.h"
#define KF_BLOCK 128
#define KF_SQ(x) \
  ((x) * (x))
__device__ float helper(float x) { return KF_SQ(x); }
#if KF_BLOCK > 64
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows(KfArgs args) { helper(1.f); }
#endif
extern "C" __global__ void kf_rows_partial(KfArgs args) {}
extern "C"
__global__ void __launch_bounds__((KF_BLOCK), 2) kf_rows_finish(KfArgs args) {}
__global__ void not_extern(KfArgs args) {}
// kf_rows in a comment; kf_rows_body is another name
)";

constexpr char kPlan[] = R"({"let": [], "launches": [{"entry": "kf_rows", "grid": ["1"],
  "block": [128, 1, 1], "shared_bytes": "0"}, {"entry": "kf_rows_finish", "grid": ["1"],
  "block": [128, 1, 1], "shared_bytes": "0"}]})";

TEST(ExternEntryNames, FindsExternCGlobalsWithAndWithoutLaunchBounds) {
  EXPECT_THAT(ExternEntryNames(kSource),
              ElementsAre("kf_rows", "kf_rows_partial", "kf_rows_finish"));
  EXPECT_TRUE(ExternEntryNames("__global__ void k() {}").empty());
}

TEST(BatchKernels, RenamesEntriesPerMemberAndRewritesPlans) {
  const std::string other = std::string("// another config\n") + kSource;
  auto batch = BatchKernels({{kSource, kPlan}, {other, kPlan}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const std::string& s = batch->source;
  EXPECT_THAT(s, HasSubstr("kf_rows__kfb0(KfArgs"));
  EXPECT_THAT(s, HasSubstr("kf_rows__kfb1(KfArgs"));
  EXPECT_THAT(s, HasSubstr("kf_rows_partial__kfb1("));
  EXPECT_THAT(s, HasSubstr("kf_rows_finish__kfb0("));
  EXPECT_THAT(s, HasSubstr("kf_rows_body is another name"));  // whole identifiers only
  EXPECT_THAT(s, Not(HasSubstr("kf_rows(KfArgs")));
  EXPECT_THAT(s, HasSubstr("namespace kfb0 {"));
  EXPECT_THAT(s, HasSubstr("namespace kfb1 {"));
  ASSERT_EQ(batch->plans.size(), 2u);
  nlohmann::json plan = nlohmann::json::parse(batch->plans[1]);
  EXPECT_EQ(plan["launches"][0]["entry"], "kf_rows__kfb1");
  EXPECT_EQ(plan["launches"][1]["entry"], "kf_rows_finish__kfb1");
  EXPECT_EQ(plan["launches"][0]["block"][0], 128);  // the rest of the plan is kept
  EXPECT_EQ(batch->entries[0].at("kf_rows_partial"), "kf_rows_partial__kfb0");
  EXPECT_THAT(batch->launched[1], ElementsAre("kf_rows__kfb1", "kf_rows_finish__kfb1"));
}

// Members with the same source (configs that differ only in their launch plan) share one copy
// of it: one namespace, compiled once, each member's plan renamed to its entries.
TEST(BatchKernels, MembersWithTheSameSourceShareItsCode) {
  const std::string other_plan = absl::StrReplaceAll(kPlan, {{"\"1\"", "\"7\""}});
  auto batch = BatchKernels({{kSource, kPlan}, {kSource, other_plan}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(batch->source, HasSubstr("namespace kfb0 {"));
  EXPECT_THAT(batch->source, Not(HasSubstr("namespace kfb1 {")));
  ASSERT_EQ(batch->plans.size(), 2u);
  nlohmann::json plan = nlohmann::json::parse(batch->plans[1]);
  EXPECT_EQ(plan["launches"][0]["entry"], "kf_rows__kfb0");
  EXPECT_EQ(plan["launches"][0]["grid"][0], "7");
  EXPECT_EQ(batch->entries[1], batch->entries[0]);
  EXPECT_THAT(batch->launched[1], ElementsAre("kf_rows__kfb0", "kf_rows_finish__kfb0"));
}

// A launch's captured entry is an entry like any other: renamed in the plan and loaded.
TEST(BatchKernels, RenamesCapturedEntries) {
  nlohmann::json captured = nlohmann::json::parse(kPlan);
  captured["launches"][0]["captured_entry"] = "kf_rows_partial";
  captured["captured"] = {{"shape_key", "0x2a"}};
  auto batch = BatchKernels({{kSource, kPlan}, {"// another\n" + std::string(kSource),
                                                 captured.dump()}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  nlohmann::json plan = nlohmann::json::parse(batch->plans[1]);
  EXPECT_EQ(plan["launches"][0]["entry"], "kf_rows__kfb1");
  EXPECT_EQ(plan["launches"][0]["captured_entry"], "kf_rows_partial__kfb1");
  EXPECT_EQ(plan["captured"]["shape_key"], "0x2a");
  EXPECT_THAT(batch->launched[1],
              ElementsAre("kf_rows__kfb1", "kf_rows_partial__kfb1", "kf_rows_finish__kfb1"));
  captured["launches"][0]["captured_entry"] = "not_extern";
  EXPECT_THAT(std::string(BatchKernels({{kSource, captured.dump()}}).status().message()),
              HasSubstr("not_extern"));
}

TEST(BatchKernels, HoistsIncludesOnceAndUndefinesEachMembersMacros) {
  auto batch = BatchKernels({{kSource, kPlan}, {std::string("// another\n") + kSource, kPlan}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const std::string& s = batch->source;
  EXPECT_EQ(s.find("#include \"kforge_device.h\""), 0u);
  EXPECT_EQ(s.find("#include", 1), std::string::npos);
  // Member 0's macros are gone before member 1 defines them again.
  const size_t undef = s.find("#undef KF_BLOCK");
  const size_t second = s.find("namespace kfb1 {");
  ASSERT_NE(undef, std::string::npos);
  EXPECT_LT(undef, second);
  EXPECT_NE(s.find("#undef KF_SQ"), std::string::npos);
  EXPECT_NE(s.find("#undef KF_BLOCK", second), std::string::npos);
  // The include sits outside every namespace: before the first one opens.
  EXPECT_LT(s.find("#include"), s.find("namespace kfb0"));
}

TEST(BatchKernels, RefusesPlansLaunchingUndefinedEntries) {
  std::string plan = kPlan;
  plan.replace(plan.find("kf_rows_finish"), 14, "not_extern");
  auto batch = BatchKernels({{kSource, kPlan}, {kSource, plan}});
  ASSERT_FALSE(batch.ok());
  EXPECT_THAT(std::string(batch.status().message()), HasSubstr("member 1"));
  EXPECT_THAT(std::string(batch.status().message()), HasSubstr("not_extern"));
  EXPECT_FALSE(BatchKernels({{kSource, "not json"}}).ok());
}

TEST(BatchKernels, RefusesConditionalIncludes) {
  auto batch = BatchKernels({{"#if 1\n#include \"x.h\"\n#endif\n", R"({"launches": []})"}});
  ASSERT_FALSE(batch.ok());
  EXPECT_THAT(std::string(batch.status().message()), HasSubstr("#include inside #if"));
}

constexpr char kSinglePtx[] = R"(
.extern .shared .align 16 .b8 kf_dsmem[];
.visible .entry kf_rows(
	.param .align 8 .b8 kf_rows_param_0[1000]
)
{
	.shared .align 4 .b8 _ZZ12kf_rows_bodyE3red[24];
	mov.u64 	%rd1, _ZZ12kf_rows_bodyE3red;
	mov.u64 	%rd2, kf_dsmem;
	@%p1 bra 	$L__BB0_3;
$L__BB0_3:
	ret;
}
)";

constexpr char kBatchPtx[] = R"(
.extern .shared .align 16 .b8 _ZN4kfb02kf_dsmemE[];
.extern .shared .align 16 .b8 _ZN4kfb12kf_dsmemE[];
.visible .entry kf_rows__kfb0(
	.param .align 8 .b8 kf_rows__kfb0_param_0[1000]
)
{
	ret;
}
.visible .entry kf_rows__kfb1(
	.param .align 8 .b8 kf_rows__kfb1_param_0[1000]
)
{
	.shared .align 4 .b8 _ZZN4kfb112kf_rows_bodyE3red[24];
	mov.u64 	%rd1, _ZZN4kfb112kf_rows_bodyE3red;
	mov.u64 	%rd2, _ZN4kfb12kf_dsmemE;
	@%p1 bra 	$L__BB7_3;
$L__BB7_3:
	ret;
}
)";

TEST(CanonicalPtxEntries, EqualUpToSymbolNamesAndLabels) {
  auto single = CanonicalPtxEntries(kSinglePtx, -1);
  auto member1 = CanonicalPtxEntries(kBatchPtx, 1);
  auto member0 = CanonicalPtxEntries(kBatchPtx, 0);
  ASSERT_EQ(single.size(), 1u);
  ASSERT_EQ(member1.size(), 1u);
  EXPECT_EQ(single.at("kf_rows"), member1.at("kf_rows"));
  EXPECT_NE(single.at("kf_rows"), member0.at("kf_rows"));  // different code stays different
  EXPECT_TRUE(CanonicalPtxEntries(kBatchPtx, -1).empty());
}

}  // namespace
}  // namespace kforge::bench
