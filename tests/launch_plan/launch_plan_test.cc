// Tests of LaunchPlan: parsing and its errors, resolution against tensor signatures, and
// the CUDA launch limits.
#include "common/launch_plan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSoftmaxPlan[] = R"json({
  "let": [["ROWS", "in0_numel / in0_size_last"], ["COLS", "in0_size_last"]],
  "scratch_bytes": "ROWS * 8",
  "launches": [
    {"entry": "kf_softmax_rows",
     "grid": ["ceil_div(ROWS, 4)", 1, 1],
     "block": [128, 1, 1],
     "shared_bytes": "0",
     "cluster": [1, 1, 1]}
  ],
  "requires": {"contiguous": true, "alignment_bytes": 16}
})json";

v1::TensorSignature Tensor(std::vector<int64_t> sizes, std::vector<int64_t> strides = {}) {
  v1::TensorSignature t;
  for (int64_t s : sizes) t.add_sizes(s);
  for (int64_t s : strides) t.add_strides(s);
  t.set_dtype(v1::FLOAT32);
  return t;
}

std::string ParseError(std::string_view json) {
  auto plan = LaunchPlan::Parse(json);
  EXPECT_FALSE(plan.ok()) << json;
  if (plan.ok()) return "";
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(plan.status().message());
}

std::string ResolveError(std::string_view json, const SymbolTable& symbols) {
  auto plan = LaunchPlan::Parse(json);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return "";
  auto resolved = plan->Resolve(symbols);
  EXPECT_FALSE(resolved.ok()) << json;
  return resolved.ok() ? "" : std::string(resolved.status().message());
}

std::string OneLaunch(absl::string_view grid, absl::string_view block,
                      absl::string_view extra = "") {
  return absl::StrCat(R"({"launches": [{"entry": "k", "grid": )", grid, R"(, "block": )", block,
                      extra, "}]}");
}

TEST(LaunchPlanTest, ParsesTheDocumentedExample) {
  auto plan = LaunchPlan::Parse(kSoftmaxPlan);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->EntryPoints(), ElementsAre("kf_softmax_rows"));
  EXPECT_TRUE(plan->requirements().contiguous);
  EXPECT_EQ(plan->requirements().alignment_bytes, 16);
  ASSERT_EQ(plan->launches().size(), 1u);
  EXPECT_EQ(plan->launches()[0].grid[0], "ceil_div(ROWS, 4)");
  EXPECT_EQ(plan->launches()[0].block[0], "128");
  EXPECT_FALSE(plan->canonical_json().empty());
}

TEST(LaunchPlanTest, ResolvesAgainstSignatures) {
  auto plan = LaunchPlan::Parse(kSoftmaxPlan);
  ASSERT_TRUE(plan.ok()) << plan.status();
  SymbolTable symbols = BindSymbols({Tensor({8, 50, 1000})}, {Tensor({8, 50, 1000})}, {}, 132);
  auto resolved = plan->Resolve(symbols);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->launches.size(), 1u);
  const ResolvedLaunch& launch = resolved->launches[0];
  EXPECT_EQ(launch.entry, "kf_softmax_rows");
  EXPECT_EQ(launch.grid, (Dim3{100, 1, 1}));  // 400 rows / 4 per block
  EXPECT_EQ(launch.block, (Dim3{128, 1, 1}));
  EXPECT_EQ(launch.shared_bytes, 0);
  ASSERT_TRUE(launch.cluster.has_value());
  EXPECT_EQ(*launch.cluster, (Dim3{1, 1, 1}));
  EXPECT_EQ(resolved->scratch_bytes, 400 * 8);
  EXPECT_EQ(resolved->symbols.at("ROWS"), 400);
  EXPECT_EQ(resolved->symbols.at("COLS"), 1000);
}

TEST(LaunchPlanTest, MissingDimsAreOneAndOptionalFieldsDefault) {
  auto plan = LaunchPlan::Parse(R"({"launches": [{"entry": "a", "grid": [7], "block": [32, 2]},
                                                  {"entry": "b", "grid": ["int0"], "block": [64]},
                                                  {"entry": "a", "grid": [1], "block": [1]}]})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->EntryPoints(), ElementsAre("a", "b"));
  EXPECT_FALSE(plan->requirements().contiguous);
  EXPECT_EQ(plan->requirements().alignment_bytes, 1);
  auto resolved = plan->Resolve(BindSymbols({}, {}, {5}, 132));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->launches[0].grid, (Dim3{7, 1, 1}));
  EXPECT_EQ(resolved->launches[0].block, (Dim3{32, 2, 1}));
  EXPECT_FALSE(resolved->launches[0].cluster.has_value());
  EXPECT_FALSE(resolved->launches[0].cooperative);
  EXPECT_EQ(resolved->launches[1].grid, (Dim3{5, 1, 1}));
  EXPECT_EQ(resolved->scratch_bytes, 0);
}

TEST(LaunchPlanTest, CooperativeIsABooleanAndExcludesClusters) {
  auto plan = LaunchPlan::Parse(OneLaunch("[8]", "[256]", R"(, "cooperative": true)"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->launches()[0].cooperative);
  auto resolved = plan->Resolve(BindSymbols({}, {}, {}, 132));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_TRUE(resolved->launches[0].cooperative);
  EXPECT_THAT(ParseError(OneLaunch("[8]", "[256]", R"(, "cooperative": 1)")),
              HasSubstr("launches[0].cooperative: expected true or false"));
  EXPECT_THAT(ParseError(OneLaunch("[8]", "[256]", R"(, "cluster": [2], "cooperative": true)")),
              HasSubstr("cooperative or clustered, not both"));
}

// early_start (programmatic dependent launch): a boolean, never on the first launch (it
// follows the work that wrote its inputs) nor on a cooperative one.
TEST(LaunchPlanTest, EarlyStartIsABooleanOnALaterOrdinaryLaunch) {
  auto two = [](absl::string_view second_extra) {
    return absl::StrCat(R"({"launches": [{"entry": "a", "grid": [8], "block": [256]},
                                          {"entry": "b", "grid": [8], "block": [256])",
                        second_extra, "}]}");
  };
  auto plan = LaunchPlan::Parse(two(R"(, "early_start": true)"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->launches()[0].early_start);
  EXPECT_TRUE(plan->launches()[1].early_start);
  auto resolved = plan->Resolve(BindSymbols({}, {}, {}, 132));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_FALSE(resolved->launches[0].early_start);
  EXPECT_TRUE(resolved->launches[1].early_start);
  EXPECT_THAT(plan->canonical_json(), HasSubstr("\"early_start\":true"));
  EXPECT_THAT(ParseError(two(R"(, "early_start": "yes")")),
              HasSubstr("launches[1].early_start: expected true or false"));
  EXPECT_THAT(ParseError(OneLaunch("[8]", "[256]", R"(, "early_start": true)")),
              HasSubstr("launches[0].early_start: the first launch cannot start early"));
  EXPECT_THAT(ParseError(two(R"(, "cooperative": true, "early_start": true)")),
              HasSubstr("a cooperative launch cannot start early"));
}

// captured: the call the captured entries are for, as a hex string key (JSON numbers lose
// 64-bit precision in many writers) and an alignment; a captured entry and a captured call
// come together.
TEST(LaunchPlanTest, CapturedCallNamesItsKeyAlignmentAndEntries) {
  auto with = [](absl::string_view captured, absl::string_view extra) {
    return absl::StrCat(R"({"launches": [{"entry": "k", "grid": [8], "block": [256])", extra,
                        "}]", captured, "}");
  };
  const std::string entry = R"(, "captured_entry": "k_captured")";
  auto plan = LaunchPlan::Parse(
      with(R"(, "captured": {"shape_key": "0xfedcba9876543210", "alignment_bytes": 16})", entry));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->captured().has_value());
  EXPECT_EQ(plan->captured()->shape_key, 0xfedcba9876543210ull);
  EXPECT_EQ(plan->captured()->alignment_bytes, 16);
  EXPECT_THAT(plan->EntryPoints(), ElementsAre("k", "k_captured"));
  auto resolved = plan->Resolve(BindSymbols({}, {}, {}, 132));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->captured, plan->captured());
  EXPECT_EQ(resolved->launches[0].captured_entry, "k_captured");

  auto unaligned = LaunchPlan::Parse(with(R"(, "captured": {"shape_key": "0x1"})", entry));
  ASSERT_TRUE(unaligned.ok()) << unaligned.status();
  EXPECT_EQ(unaligned->captured()->alignment_bytes, 1);
  auto plain = LaunchPlan::Parse(with("", ""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->captured().has_value());
  EXPECT_FALSE(plain->Resolve(BindSymbols({}, {}, {}, 132))->captured.has_value());

  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": 12})", entry)),
              HasSubstr("captured.shape_key: 12 is not a string of 0x and 1 to 16 hex digits"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x12345678901234567"})", entry)),
              HasSubstr("captured.shape_key"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0xg1"})", entry)),
              HasSubstr("captured.shape_key"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"alignment_bytes": 16})", entry)),
              HasSubstr("captured: missing 'shape_key'"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x1", "alignment_bytes": 3})",
                              entry)),
              HasSubstr("captured.alignment_bytes: 3 is not a power of two"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x1", "key": 1})", entry)),
              HasSubstr("captured: unknown key 'key'"));
  EXPECT_THAT(ParseError(with(R"(, "captured": [1])", entry)),
              HasSubstr("captured: expected an object, got array"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x1"})", "")),
              HasSubstr("no launch names a captured_entry"));
  EXPECT_THAT(ParseError(with("", entry)), HasSubstr("the plan has no 'captured' call"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x1"})",
                              R"(, "captured_entry": "k")")),
              HasSubstr("launches[0].captured_entry: is the launch's entry"));
  EXPECT_THAT(ParseError(with(R"(, "captured": {"shape_key": "0x1"})",
                              R"(, "captured_entry": "k c")")),
              HasSubstr("launches[0].captured_entry: expected the name of an extern"));
}

TEST(LaunchPlanTest, BindSymbolsFollowsTheDoc) {
  SymbolTable s = BindSymbols({Tensor({4, 6}, {1, 4}), Tensor({})}, {Tensor({4, 6})}, {3, -1}, 78);
  EXPECT_EQ(s.at("in0_size0"), 4);
  EXPECT_EQ(s.at("in0_size1"), 6);
  EXPECT_EQ(s.at("in0_stride0"), 1);
  EXPECT_EQ(s.at("in0_stride1"), 4);
  EXPECT_EQ(s.at("in0_ndim"), 2);
  EXPECT_EQ(s.at("in0_numel"), 24);
  EXPECT_EQ(s.at("in0_size_last"), 6);
  EXPECT_EQ(s.at("in1_ndim"), 0);
  EXPECT_EQ(s.at("in1_numel"), 1);
  EXPECT_EQ(s.at("in1_size_last"), 1);
  EXPECT_EQ(s.at("out0_stride0"), 6);  // contiguous when the signature has no strides
  EXPECT_EQ(s.at("out0_stride1"), 1);
  EXPECT_EQ(s.at("int0"), 3);
  EXPECT_EQ(s.at("int1"), -1);
  EXPECT_EQ(s.at("num_sms"), 78);
  EXPECT_FALSE(s.contains("in2_numel"));
}

TEST(LaunchPlanTest, ParseErrors) {
  EXPECT_THAT(ParseError("not json"), HasSubstr("launch plan: not valid JSON"));
  EXPECT_THAT(ParseError(""), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseError("[1, 2]"), HasSubstr("expected a JSON object, got array"));
  EXPECT_THAT(ParseError("{}"), HasSubstr("no 'launches'"));
  EXPECT_THAT(ParseError(R"({"launches": []})"), HasSubstr("launches: is empty"));
  EXPECT_THAT(ParseError(R"({"launches": [{"grid": [1], "block": [1]}]})"),
              HasSubstr("launches[0]: missing 'entry'"));
  EXPECT_THAT(ParseError(R"({"launches": [{"entry": "k", "block": [1]}]})"),
              HasSubstr("launches[0]: missing 'grid'"));
  EXPECT_THAT(ParseError(R"({"launches": [{"entry": "k k", "grid": [1], "block": [1]}]})"),
              HasSubstr("launches[0].entry"));
  EXPECT_THAT(ParseError(OneLaunch("[1, 1, 1, 1]", "[1]")),
              HasSubstr("launches[0].grid: expected 1 to 3 dimensions, got 4"));
  EXPECT_THAT(ParseError(OneLaunch("[]", "[1]")),
              HasSubstr("launches[0].grid: expected 1 to 3 dimensions, got 0"));
  EXPECT_THAT(ParseError(OneLaunch("7", "[1]")), HasSubstr("launches[0].grid: expected an array"));
  EXPECT_THAT(ParseError(OneLaunch("[1.5]", "[1]")),
              HasSubstr("launches[0].grid[0]: expected an integer or an expression string"));
  EXPECT_THAT(ParseError(OneLaunch("[true]", "[1]")), HasSubstr("got boolean"));
  EXPECT_THAT(ParseError(OneLaunch("[\"ceil_div(N,\"]", "[1]")),
              HasSubstr("launches[0].grid[0]: launch plan expression 'ceil_div(N,'"));
  EXPECT_THAT(ParseError(OneLaunch("[1]", "[1]", R"(, "shared_byte": 0)")),
              HasSubstr("launches[0]: unknown key 'shared_byte'"));
  EXPECT_THAT(ParseError(R"({"launches": [{"entry": "k", "grid": [1], "block": [1]}],
                             "scratch": 4})"),
              HasSubstr("unknown key 'scratch'"));
  EXPECT_THAT(ParseError(R"({"let": [["A"]], "launches": [{"entry": "k", "grid": [1],
                             "block": [1]}]})"),
              HasSubstr("let[0]: expected a [\"NAME\", value] pair"));
  EXPECT_THAT(ParseError(R"({"let": [["A", 1], ["A", 2]], "launches": [{"entry": "k",
                             "grid": [1], "block": [1]}]})"),
              HasSubstr("'A' is bound twice"));
  EXPECT_THAT(ParseError(R"({"launches": [{"entry": "k", "grid": [1], "block": [1]}],
                             "requires": {"alignment_bytes": 12}})"),
              HasSubstr("requires.alignment_bytes: 12 is not a power of two"));
  EXPECT_THAT(ParseError(R"({"launches": [{"entry": "k", "grid": [1], "block": [1]}],
                             "requires": {"aligned": true}})"),
              HasSubstr("requires: unknown key 'aligned'"));
  EXPECT_THAT(ParseError(OneLaunch("[18446744073709551615]", "[1]")),
              HasSubstr("does not fit in 64 bits"));
  EXPECT_THAT(ParseError(std::string(kMaxLaunchPlanBytes + 1, ' ')), HasSubstr("bytes; at most"));
}

TEST(LaunchPlanTest, LetUsesEarlierNamesOnly) {
  EXPECT_TRUE(LaunchPlan::Parse(R"({"let": [["A", 4], ["B", "A * 2"]],
      "launches": [{"entry": "k", "grid": ["B"], "block": [1]}]})")
                  ->Resolve({})
                  .ok());
  EXPECT_THAT(ResolveError(R"({"let": [["B", "A * 2"], ["A", 4]],
      "launches": [{"entry": "k", "grid": ["B"], "block": [1]}]})",
                           {}),
              HasSubstr("let[0] (B): launch plan expression 'A * 2': unknown symbol 'A'"));
  EXPECT_THAT(ResolveError(R"({"let": [["num_sms", 4]],
      "launches": [{"entry": "k", "grid": [1], "block": [1]}]})",
                           {{"num_sms", 132}}),
              HasSubstr("shadows a symbol"));
}

TEST(LaunchPlanTest, MultipleOfIsCheckedAtResolve) {
  const std::string plan = R"({"let": [["COLS", "in0_size_last"]],
      "launches": [{"entry": "k", "grid": [1], "block": [1]}],
      "requires": {"multiple_of": [["COLS", 8], ["in0_numel / COLS", 2]]}})";
  auto parsed = LaunchPlan::Parse(plan);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->requirements().multiple_of.size(), 2u);
  EXPECT_TRUE(parsed->Resolve({{"in0_size_last", 64}, {"in0_numel", 256}}).ok());
  EXPECT_THAT(ResolveError(plan, {{"in0_size_last", 60}, {"in0_numel", 240}}),
              HasSubstr("requires.multiple_of[0]: 'COLS' is 60, not a multiple of 8; the kernel "
                        "is not for this shape"));
  EXPECT_THAT(ResolveError(plan, {{"in0_size_last", 64}, {"in0_numel", 192}}),
              HasSubstr("requires.multiple_of[1]: 'in0_numel / COLS' is 3, not a multiple of 2"));
  const std::string head = R"({"launches": [{"entry": "k", "grid": [1], "block": [1]}],
      "requires": {"multiple_of": )";
  EXPECT_THAT(ParseError(head + R"("COLS"}})"),
              HasSubstr("requires.multiple_of: expected an array"));
  EXPECT_THAT(ParseError(head + R"([["COLS"]]}})"),
              HasSubstr("requires.multiple_of[0]: expected [expression, multiple]"));
  EXPECT_THAT(ParseError(head + R"([["COLS", 0]]}})"),
              HasSubstr("requires.multiple_of[0][1]: 0 is not an integer from 1 to 2^20"));
  EXPECT_THAT(ParseError(head + R"([["COLS +", 8]]}})"),
              HasSubstr("requires.multiple_of[0][0]: launch plan expression 'COLS +'"));
}

TEST(LaunchPlanTest, CudaLimitErrors) {
  const SymbolTable n = {{"N", 0}, {"BIG", int64_t{1} << 31}, {"NEG", -4}};
  EXPECT_THAT(ResolveError(OneLaunch("[1]", "[32, 32, 2]"), n),
              HasSubstr("32 x 32 x 2 = 2048 threads; CUDA allows at most 1024 per block"));
  EXPECT_THAT(ResolveError(OneLaunch("[1]", "[2048]"), n),
              HasSubstr("block dimension x is 2048; CUDA allows at most 1024"));
  EXPECT_THAT(ResolveError(OneLaunch("[1]", "[1, 1, 128]"), n),
              HasSubstr("block dimension z is 128; CUDA allows at most 64"));
  EXPECT_THAT(ResolveError(OneLaunch("[\"BIG\"]", "[1]"), n),
              HasSubstr("grid dimension x is 2147483648; CUDA allows at most 2147483647"));
  EXPECT_THAT(ResolveError(OneLaunch("[1, 65536]", "[1]"), n),
              HasSubstr("launches[0] (k).grid: grid dimension y is 65536"));
  EXPECT_THAT(ResolveError(OneLaunch("[\"ceil_div(N, 256)\"]", "[256]"), n),
              HasSubstr("launches[0] (k).grid: dimension x is 0 (from 'ceil_div(N, 256)')"));
  EXPECT_THAT(ResolveError(OneLaunch("[1]", "[1]", R"(, "shared_bytes": "NEG")"), n),
              HasSubstr("shared_bytes: is -4"));
  EXPECT_THAT(ResolveError(OneLaunch("[6]", "[1]", R"(, "cluster": [4])"), n),
              HasSubstr("not a multiple of cluster 4 x 1 x 1"));
  EXPECT_THAT(ResolveError(OneLaunch("[64]", "[1]", R"(, "cluster": [32])"), n),
              HasSubstr("cluster dimension x is 32"));
  EXPECT_THAT(ResolveError(OneLaunch("[\"ceil_div(N, 0)\"]", "[1]"), n),
              HasSubstr("launches[0] (k).grid[0]: launch plan expression 'ceil_div(N, 0)': "
                        "division by zero in ceil_div"));
  EXPECT_THAT(ResolveError(R"({"scratch_bytes": "NEG", "launches": [{"entry": "k",
                               "grid": [1], "block": [1]}]})",
                           n),
              HasSubstr("scratch_bytes: is -4"));
  // The largest legal values pass.
  auto plan = LaunchPlan::Parse(OneLaunch("[2147483647, 65535, 65535]", "[1024]"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->Resolve(n).ok());
}

}  // namespace
}  // namespace kforge
