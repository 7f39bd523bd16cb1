// Response parser: accepted answers and every rejection reason.
#include "services/proposer/llm/response_parser.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/prompt_builder.h"
#include "tests/llm/test_requests.h"

namespace kforge {
namespace {

constexpr char kKernel[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_copy(KfArgs args) {
  const float* x = static_cast<const float*>(args.inputs[0].data);
  float* y = static_cast<float*>(args.outputs[0].data);
  for (long long i = threadIdx.x; i < args.outputs[0].numel; i += blockDim.x) y[i] = x[i];
}
)";
constexpr char kPlan[] = R"({"launches": [{"entry": "kf_copy", "grid": [1], "block": [256]}]})";

std::string Answer(const std::string& source, const std::string& plan = kPlan) {
  return "Here is the kernel.\n\n```cuda\n" + source + "```\n\n```json\n" + plan + "\n```\n";
}

std::string Reason(const std::string& text) {
  ParseResult result = ParseLlmAnswer(text);
  EXPECT_FALSE(result.ok()) << "accepted: " << text;
  EXPECT_FALSE(result.rejection.message().empty());
  return result.rejection.reason();
}

// The answer text inside a recorded OpenAI body.
std::string RecordedAnswer(const std::string& file) {
  return nlohmann::json::parse(testing::ReadRecorded(file))["choices"][0]["message"]["content"]
      .get<std::string>();
}

TEST(ResponseParserTest, AcceptsOneCodeBlockAndOnePlan) {
  ParseResult result = ParseLlmAnswer(Answer(kKernel));
  ASSERT_TRUE(result.ok()) << result.rejection.message();
  EXPECT_EQ(result.answer->source, kKernel);
  EXPECT_EQ(nlohmann::json::parse(result.answer->launch_plan_json), nlohmann::json::parse(kPlan));
  EXPECT_EQ(result.answer->entry_points, std::vector<std::string>{"kf_copy"});
}

TEST(ResponseParserTest, AcceptsTheRecordedGoodAnswer) {
  ParseResult result = ParseLlmAnswer(RecordedAnswer("openai_good.json"));
  ASSERT_TRUE(result.ok()) << result.rejection.message();
  EXPECT_EQ(result.answer->entry_points, std::vector<std::string>{"kf_softmax_rows"});
  EXPECT_NE(result.answer->source.find("__launch_bounds__(128) kf_softmax_rows"),
            std::string::npos);
}

TEST(ResponseParserTest, AcceptsTheExampleThePromptShows) {
  ParseResult result = ParseLlmAnswer(ExampleAnswer());
  ASSERT_TRUE(result.ok()) << result.rejection.message();
}

TEST(ResponseParserTest, AcceptsExternCBlocksHostDeviceHelpersAndAllowedIncludes) {
  const std::string source = R"(#include "kforge_device.h"
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cuda/std/limits>
// A comment that mentions cudaMalloc( and int main() is not code.
/* Nor is printf to a file: fopen("x", "w"); */
__host__ __device__ inline float twice(float v) { return 2.f * v; }
extern "C" {
__global__ void __launch_bounds__(256) kf_a(KfArgs args) { (void)args; }
__global__ void kf_b(const KfArgs args) { (void)args; }
}
)";
  const std::string plan = R"json({"launches": [
      {"entry": "kf_a", "grid": [1], "block": [256]},
      {"entry": "kf_b", "grid": ["ceil_div(in0_numel, 256)"], "block": [256]}]})json";
  ParseResult result = ParseLlmAnswer(Answer(source, plan));
  ASSERT_TRUE(result.ok()) << result.rejection.message();
  EXPECT_EQ(result.answer->entry_points, (std::vector<std::string>{"kf_a", "kf_b"}));
}

TEST(ResponseParserTest, UntaggedBlocksAreClassifiedByContent) {
  const std::string text = "```\n" + std::string(kKernel) + "```\n```\n" + kPlan + "\n```\n";
  ParseResult result = ParseLlmAnswer(text);
  ASSERT_TRUE(result.ok()) << result.rejection.message();
}

TEST(ResponseParserTest, RejectsRecordedMalformedAnswersWithTheRightReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"openai_no_code_block.json", kRejectNoCodeBlock},
      {"openai_two_code_blocks.json", kRejectMultipleCodeBlocks},
      {"openai_no_plan_block.json", kRejectNoPlanBlock},
      {"openai_two_plan_blocks.json", kRejectMultiplePlanBlocks},
      {"openai_host_code.json", kRejectHostCode},
      {"openai_bad_include.json", kRejectBadInclude},
      {"openai_bad_plan_json.json", kRejectBadPlanJson},
      {"openai_bad_entry_point.json", kRejectBadEntryPoint},
      {"openai_plan_without_entry.json", kRejectBadEntryPoint},
      {"openai_not_extern_c.json", kRejectBadEntryPoint},
  };
  for (const auto& [file, reason] : cases) {
    EXPECT_EQ(Reason(RecordedAnswer(file)), reason) << file;
  }
}

TEST(ResponseParserTest, RejectsNoCodeBlock) {
  EXPECT_EQ(Reason("Use one warp per row.\n```json\n{}\n```\n"), kRejectNoCodeBlock);
  EXPECT_EQ(Reason("no blocks at all"), kRejectNoCodeBlock);
  // A Python block is not kernel source.
  EXPECT_EQ(Reason("```python\nimport torch\n```\n```json\n" + std::string(kPlan) + "\n```"),
            kRejectNoCodeBlock);
}

TEST(ResponseParserTest, RejectsTwoCodeBlocks) {
  EXPECT_EQ(Reason("```cuda\n" + std::string(kKernel) + "```\n" + Answer(kKernel)),
            kRejectMultipleCodeBlocks);
}

TEST(ResponseParserTest, RejectsMissingOrDoublePlan) {
  EXPECT_EQ(Reason("```cuda\n" + std::string(kKernel) + "```\n"), kRejectNoPlanBlock);
  EXPECT_EQ(Reason(Answer(kKernel) + "```json\n" + kPlan + "\n```\n"), kRejectMultiplePlanBlocks);
}

TEST(ResponseParserTest, RejectsAnUnterminatedBlock) {
  EXPECT_EQ(Reason("```cuda\n" + std::string(kKernel)), kRejectUnterminatedBlock);
}

TEST(ResponseParserTest, RejectsHostCode) {
  const std::string host_snippets[] = {
      "int main() { return 0; }\n",
      "void launch(KfArgs a) { kf_copy<<<1, 256>>>(a); }\n",
      "__device__ void f(float** p) { cudaMalloc((void**)p, 16); }\n",
      "__device__ void f(void* d, void* s) { cudaMemcpy(d, s, 4, cudaMemcpyDeviceToDevice); }\n",
      "__device__ float* f() { return (float*)malloc(64); }\n",
      "__device__ void f() { FILE* out = fopen(\"/tmp/x\", \"w\"); }\n",
      "__device__ void f() { system(\"rm -rf /\"); }\n",
      "__host__ void setup() {}\n",
      "__device__ void f() { cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0); }\n",
      "__device__ void f(at::Tensor t) {}\n",
  };
  for (const std::string& snippet : host_snippets) {
    ParseResult result = ParseLlmAnswer(Answer(std::string(kKernel) + snippet));
    ASSERT_FALSE(result.ok()) << snippet;
    EXPECT_EQ(result.rejection.reason(), kRejectHostCode) << snippet;
    EXPECT_NE(result.rejection.message().find("Line "), std::string::npos);
  }
}

TEST(ResponseParserTest, RejectsIncludesOutsideTheAllowList) {
  for (const char* include :
       {"#include <cstdio>\n", "#include <cuda_runtime.h>\n", "#include \"../../etc/passwd\"\n",
        "#include <cub/cub.cuh>\n", "#define H <stdio.h>\n#include H\n"}) {
    ParseResult result = ParseLlmAnswer(Answer(include + std::string(kKernel)));
    ASSERT_FALSE(result.ok()) << include;
    EXPECT_EQ(result.rejection.reason(), kRejectBadInclude) << include;
  }
}

TEST(ResponseParserTest, RejectsPlansThatAreNotJson) {
  EXPECT_EQ(Reason(Answer(kKernel, "{\"launches\": [,]}")), kRejectBadPlanJson);
  EXPECT_EQ(Reason(Answer(kKernel, "[1, 2]")), kRejectBadPlanJson);
}

TEST(ResponseParserTest, RejectsPlansWithoutAValidEntryPoint) {
  EXPECT_EQ(Reason(Answer(kKernel, R"({"launches": []})")), kRejectBadEntryPoint);
  EXPECT_EQ(Reason(Answer(kKernel, R"({"launches": [{"grid": [1], "block": [1]}]})")),
            kRejectBadEntryPoint);
  ParseResult unknown = ParseLlmAnswer(
      Answer(kKernel, R"({"launches": [{"entry": "nope", "grid": [1], "block": [1]}]})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.rejection.reason(), kRejectBadEntryPoint);
  EXPECT_NE(unknown.rejection.message().find("kf_copy"), std::string::npos)
      << "the message lists what the source defines: " << unknown.rejection.message();
  // An entry point that does not take KfArgs cannot be launched by the worker.
  const std::string raw_pointers = R"(#include "kforge_device.h"
extern "C" __global__ void kf_copy(const float* x, float* y) { y[0] = x[0]; }
)";
  EXPECT_EQ(Reason(Answer(raw_pointers)), kRejectBadEntryPoint);
}

// A captured entry (docs/launch-plan.md) takes KfCapturedArgs: the launcher passes the
// pointers alone for the plan's captured call.
TEST(ResponseParserTest, CapturedEntriesTakeKfCapturedArgs) {
  const std::string source = std::string(kKernel) + R"(
extern "C" __global__ void kf_copy_captured(KfCapturedArgs args) {
  static_cast<float*>(args.data[KF_MAX_INPUTS])[threadIdx.x] =
      static_cast<const float*>(args.data[0])[threadIdx.x];
}
)";
  auto plan = [](const std::string& captured_entry) {
    return R"({"launches": [{"entry": "kf_copy", "captured_entry": ")" + captured_entry +
           R"(", "grid": [1], "block": [256]}], "captured": {"shape_key": "0x2a"}})";
  };
  ParseResult result = ParseLlmAnswer(Answer(source, plan("kf_copy_captured")));
  ASSERT_TRUE(result.ok()) << result.rejection.message();
  EXPECT_EQ(result.answer->entry_points,
            (std::vector<std::string>{"kf_copy", "kf_copy_captured"}));
  // Not defined, or taking KfArgs: the worker would pass the wrong struct.
  ParseResult missing = ParseLlmAnswer(Answer(kKernel, plan("kf_copy_captured")));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.rejection.reason(), kRejectBadEntryPoint);
  EXPECT_NE(missing.rejection.message().find("kf_copy_captured(KfCapturedArgs args)"),
            std::string::npos)
      << missing.rejection.message();
  const std::string takes_kfargs = std::string(kKernel) + R"(
extern "C" __global__ void kf_copy_captured(KfArgs args) {}
)";
  EXPECT_EQ(Reason(Answer(takes_kfargs, plan("kf_copy_captured"))), kRejectBadEntryPoint);
  // The captured call without a captured entry is the plan parser's refusal.
  EXPECT_EQ(Reason(Answer(kKernel, R"({"launches": [{"entry": "kf_copy", "grid": [1],
                                       "block": [256]}], "captured": {"shape_key": "0x2a"}})")),
            kRejectBadPlan);
}

TEST(ResponseParserTest, RejectsPlansTheLaunchPlanParserRefuses) {
  EXPECT_EQ(Reason(Answer(kKernel, R"({"launches": [{"entry": "kf_copy", "grid": [1],
                                       "block": [1, 1, 1, 1]}]})")),
            kRejectBadPlan);
}

TEST(ResponseParserTest, StripCommentsKeepsStringsAndLines) {
  const std::string stripped = StripComments("a // x\n\"//not\" /* y\n z */ b");
  EXPECT_EQ(stripped.find("x"), std::string::npos);
  EXPECT_NE(stripped.find("\"//not\""), std::string::npos);
  EXPECT_EQ(std::count(stripped.begin(), stripped.end(), '\n'), 2);
  EXPECT_NE(stripped.find(" b"), std::string::npos);
}

TEST(ResponseParserTest, FindsExternCGlobalFunctions) {
  EXPECT_EQ(ExternCGlobalFunctions(R"(
__global__ void not_c(KfArgs a) {}
extern "C" __global__ void yes_1(KfArgs a) {}
extern "C" { __global__ void yes_2(KfArgs a) { if (1) { } } }
__global__ void also_not(KfArgs a) {}
)"),
            (std::vector<std::string>{"yes_1", "yes_2"}));
}

}  // namespace
}  // namespace kforge
