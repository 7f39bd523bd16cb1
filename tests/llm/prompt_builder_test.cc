// Prompt builder: the prompt carries everything the model needs to write the next kernel.
#include "services/proposer/llm/prompt_builder.h"

#include <string>

#include "gtest/gtest.h"
#include "services/proposer/llm/aten_op_descriptions.h"
#include "services/proposer/llm/embedded_docs.h"
#include "tests/llm/test_requests.h"

namespace kforge {
namespace {

std::string FullPrompt(const v1::ProposeRequest& request) {
  ChatRequest chat = BuildProposalPrompt(request);
  return chat.system + "\n" + chat.user;
}

void ExpectContains(const std::string& text, const std::string& piece) {
  EXPECT_NE(text.find(piece), std::string::npos) << "prompt lacks: " << piece;
}

TEST(PromptBuilderTest, EmbedsTheKernelAbiAndTheLaunchPlanFormatVerbatim) {
  ASSERT_NE(KernelAbiHeaderText().find("typedef struct KfArgs"), std::string_view::npos);
  ASSERT_NE(LaunchPlanFormatText().find("## Expressions"), std::string_view::npos);
  const std::string system = BuildSystemPrompt();
  ExpectContains(system, std::string(KernelAbiHeaderText()));
  ExpectContains(system, std::string(LaunchPlanFormatText()));
  ExpectContains(system, "exactly one ```cuda");
  ExpectContains(system, "exactly one ```json");
  ExpectContains(system, ExampleAnswer());
}

TEST(PromptBuilderTest, RootPromptHasSchemaSemanticsSignatureAndGpu) {
  const std::string prompt = FullPrompt(testing::SoftmaxRootRequest());
  // Schema and semantics.
  ExpectContains(prompt,
                 "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  ExpectContains(prompt, std::string(KnownAtenOpDescription("aten::softmax")));
  // Signature: shapes, strides, dtype, scalars and where they sit in KfArgs.
  ExpectContains(prompt, "sizes [8, 128, 4096]");
  ExpectContains(prompt, "strides [524288, 4096, 1]");
  ExpectContains(prompt, "float32");
  ExpectContains(prompt, "args.int_args[0] = -1");
  ExpectContains(prompt, "`dtype` of aten::softmax = None (not passed)");
  ExpectContains(prompt, "COLS=4096");
  ExpectContains(prompt, "21.50 us");  // eager time
  ExpectContains(prompt, "4.10 us");   // floor
  // GPU.
  ExpectContains(prompt, "NVIDIA H200, sm_90");
  ExpectContains(prompt, "SMs: 132");
  ExpectContains(prompt, "L2 cache: 50.0 MiB");
  ExpectContains(prompt, "shared memory per block (opt-in): 227.0 KiB");
  ExpectContains(prompt, "measured copy bandwidth: 4100 GB/s");
  ExpectContains(prompt, "first kernel");
  EXPECT_EQ(prompt.find("## Parent kernel"), std::string::npos);
}

// An in-place op (its schema writes self and returns it) tells the model the output is self's
// memory; a functional op says nothing of it.
TEST(PromptBuilderTest, AnInPlaceOpSaysTheOutputIsTheInputsMemory) {
  v1::ProposeRequest request = testing::SoftmaxRootRequest();
  EXPECT_EQ(FullPrompt(request).find("works in place"), std::string::npos);
  v1::SubgraphNode* node = request.mutable_target()->mutable_nodes(0);
  node->set_op("aten::relu_");
  node->set_overload("");
  node->set_schema("aten::relu_(Tensor(a!) self) -> Tensor(a!)");
  while (node->args_size() > 1) node->mutable_args()->RemoveLast();
  ExpectContains(FullPrompt(request),
                 "The op works in place: in the model outputs[0] is the same memory as inputs[0]");
}

TEST(PromptBuilderTest, ChildPromptHasParentFeedbackBestAndFailedSiblings) {
  const std::string prompt = FullPrompt(testing::SoftmaxChildRequest());
  // Parent source, plan and feedback: time vs eager vs floor, registers and spills.
  ExpectContains(prompt, "PARENT_SOURCE_MARKER");
  ExpectContains(prompt, R"("entry": "kf_parent_softmax")");
  ExpectContains(prompt, "Time: 15.00 us vs PyTorch eager 21.50 us (speedup 1.43x)");
  ExpectContains(prompt, "floor 4.10 us, so 27% of speed-of-light");
  ExpectContains(prompt, "72 registers");
  ExpectContains(prompt, "spills 48 B stored / 64 B loaded");
  ExpectContains(prompt, "Write a faster kernel than the parent");
  // Best so far.
  ExpectContains(prompt, "## Best kernel so far");
  ExpectContains(prompt, "BEST_SOURCE_MARKER");
  // Failed siblings with their reasons.
  ExpectContains(prompt, "## Failed siblings");
  ExpectContains(prompt, "SIBLING_COMPILE_MARKER");
  ExpectContains(prompt, "Verdict: COMPILE_FAILED");
  ExpectContains(prompt, "identifier \"warp_reduce_max\" is undefined");
  ExpectContains(prompt, "SIBLING_MISMATCH_MARKER");
  ExpectContains(prompt, "Verdict: MISMATCH");
  ExpectContains(prompt, "first bad index 4096, max abs error 0.031");
  ExpectContains(prompt, "tolerance 1e-05");
}

TEST(PromptBuilderTest, FailedParentAsksForAFix) {
  v1::ProposeRequest request = testing::SoftmaxChildRequest();
  request.mutable_parent()->mutable_evaluation()->set_verdict(v1::UNWRITTEN_OUTPUT);
  request.mutable_parent()->mutable_evaluation()->mutable_diagnostics()->set_message(
      "outputs[0] still NaN at index 17");
  const std::string prompt = FullPrompt(request);
  ExpectContains(prompt, "Verdict: UNWRITTEN_OUTPUT");
  ExpectContains(prompt, "outputs[0] still NaN at index 17");
  ExpectContains(prompt, "The parent failed");
}

TEST(PromptBuilderTest, LongCompileLogsAreCut) {
  v1::ProposeRequest request = testing::SoftmaxChildRequest();
  request.mutable_parent()->mutable_compile()->set_status(v1::COMPILE_FAILED);
  request.mutable_parent()->mutable_compile()->set_log("FIRST_ERROR " + std::string(20000, 'x'));
  PromptOptions options;
  options.max_log_chars = 500;
  const std::string user = BuildUserPrompt(request, options);
  ExpectContains(user, "FIRST_ERROR");
  ExpectContains(user, "more characters cut");
  EXPECT_LT(user.size(), 12000u);
}

TEST(PromptBuilderTest, UnknownOpsAreDescribedFromTheirSchema) {
  v1::SubgraphNode node;
  node.set_op("aten::frobnicate");
  node.set_schema("aten::frobnicate(Tensor self, float alpha) -> Tensor");
  const std::string description = DescribeAtenOp(node);
  ExpectContains(description, "frobnicate");
  ExpectContains(description, "aten::frobnicate(Tensor self, float alpha) -> Tensor");
}

TEST(PromptBuilderTest, SeedComesFromTheRequest) {
  EXPECT_EQ(BuildProposalPrompt(testing::SoftmaxRootRequest()).seed, 42u);
}

}  // namespace
}  // namespace kforge
