// The LLM client and proposer against a real OpenAI-compatible server that kforge did not
// write: Hugging Face's `transformers serve`, started here as a child process and serving a
// tiny random-weight chat model written offline (write_tiny_chat_model.py). The calls must
// succeed at the protocol level (200, token usage, the seed honoured, transcript kept), the
// parser must reject the model's gibberish (it cannot write a code block: its vocabulary has
// no backtick), and the server's own errors must come back as clear errors.
//
// One server is shared by the whole suite (it takes seconds to start), so ctest runs this
// binary as one test. Skipped only when the serving packages are not installed (tools/setup
// installs them).
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/local_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/llm_client.h"
#include "services/proposer/llm/llm_proposer.h"
#include "services/proposer/llm/response_parser.h"
#include "tests/llm/test_requests.h"
#include "tests/llm/transformers_serve_process.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using testing::TransformersServeProcess;

// A variable no one sets: the local server needs no key, and a developer's OPENAI_API_KEY
// must not be sent to it.
constexpr char kNoKeyEnv[] = "KFORGE_TEST_TRANSFORMERS_SERVE_NO_KEY";
constexpr int kMaxTokens = 24;

// The one blob in `store` (a rejection carries no transcript digest; the store has it).
absl::StatusOr<std::string> OnlyBlob(Store& store) {
  absl::StatusOr<std::vector<std::string>> keys = store.List("blob/");
  if (!keys.ok()) return keys.status();
  if (keys->size() != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("expected one blob in ", store.Describe(), ", found ", keys->size()));
  }
  absl::StatusOr<std::optional<std::string>> manifest = store.Get((*keys)[0]);
  if (!manifest.ok()) return manifest.status();
  v1::Digest digest;
  digest.set_sha256((*keys)[0].substr(std::string("blob/").size()));
  digest.set_size_bytes(nlohmann::json::parse(manifest->value_or("{}")).value("size", -1));
  return GetBlob(store, digest);
}

class TransformersServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TransformersServeProcess(Python(), KFORGE_LLM_TEST_DIR
                                           "/write_tiny_chat_model.py");
    absl::StatusOr<std::string> missing = server_->MissingPackages();
    if (!missing.ok()) {
      start_status_ = new absl::Status(missing.status());
      return;
    }
    if (!missing->empty()) {
      skip_reason_ = new std::string("the packages transformers serve needs are not installed in " +
                                     Python() + " (missing: " + *missing +
                                     "); run tools/setup to install them");
      return;
    }
    // Generous for 2 busy cores: importing torch and transformers dominates the start.
    start_status_ = new absl::Status(server_->Start(absl::Seconds(90)));
  }

  static void TearDownTestSuite() {
    delete server_;  // stops the server
    delete skip_reason_;
    delete start_status_;
    server_ = nullptr;
    skip_reason_ = nullptr;
    start_status_ = nullptr;
  }

  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    ASSERT_TRUE(start_status_->ok()) << *start_status_;
    ASSERT_EQ(unsetenv(kNoKeyEnv), 0);
  }

  static LlmOptions Options() {
    LlmOptions options;
    options.backend = "openai";
    options.base_url = server_->base_url();
    options.model = server_->model();
    options.api_key_env = kNoKeyEnv;
    options.temperature = 0.7;
    options.max_tokens = kMaxTokens;
    options.read_timeout = absl::Seconds(60);
    options.max_retries = 1;
    options.backoff_base = absl::Milliseconds(50);
    options.price_input_per_mtok = 2.0;
    options.price_output_per_mtok = 8.0;
    return options;
  }

  static std::unique_ptr<LlmClient> Client(const LlmOptions& options) {
    absl::StatusOr<std::unique_ptr<LlmClient>> client = LlmClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  static std::string Log() { return "\nserver log:\n" + server_->LogTail(); }

  static TransformersServeProcess* server_;
  static std::string* skip_reason_;
  static absl::Status* start_status_;
};

TransformersServeProcess* TransformersServeTest::server_ = nullptr;
std::string* TransformersServeTest::skip_reason_ = nullptr;
absl::Status* TransformersServeTest::start_status_ = nullptr;

TEST_F(TransformersServeTest, ProposerCallSucceedsAndTheGibberishIsRejectedForNoCodeBlock) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<LocalStore>> store = LocalStore::Create(dir.str());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::unique_ptr<LlmProposer>> proposer =
      LlmProposer::Create(Options(), store->get());
  ASSERT_TRUE(proposer.ok()) << proposer.status();

  // The real prompt: op schema, GPU, the kernel ABI header, the launch-plan format.
  absl::StatusOr<v1::ProposeResponse> response =
      (*proposer)->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status() << Log();
  EXPECT_EQ(response->candidates_size(), 0) << response->DebugString();
  ASSERT_EQ(response->rejections_size(), 1) << response->DebugString() << Log();
  const v1::Rejection& rejection = response->rejections(0);
  EXPECT_EQ(rejection.reason(), kRejectNoCodeBlock) << rejection.message();
  // The answer stopped at max_tokens, and the next turn is told so.
  EXPECT_TRUE(absl::StrContains(rejection.message(), "token limit of 24")) << rejection.message();

  // Usage as the server counted it: the whole prompt in, exactly max_tokens out.
  const v1::LlmUsage& usage = response->usage();
  EXPECT_EQ(usage.calls(), 1);
  EXPECT_GT(usage.input_tokens(), 500) << "the prompt is thousands of words";
  RecordProperty("prompt_tokens", static_cast<int>(usage.input_tokens()));
  EXPECT_EQ(usage.output_tokens(), kMaxTokens);
  EXPECT_DOUBLE_EQ(usage.cost_usd(), (usage.input_tokens() * 2.0 + kMaxTokens * 8.0) / 1e6);
  EXPECT_EQ((*proposer)->UsageForJob("job-test").output_tokens(), kMaxTokens);

  // The transcript of the call is kept in the store, with the server's own raw body.
  absl::StatusOr<std::string> text = OnlyBlob(**store);
  ASSERT_TRUE(text.ok()) << text.status();
  nlohmann::json transcript = nlohmann::json::parse(*text);
  EXPECT_EQ(transcript["schema"], "kforge.llm_transcript.v1");
  EXPECT_EQ(transcript["outcome"], "rejected");
  EXPECT_EQ(transcript["rejection"]["reason"], kRejectNoCodeBlock);
  EXPECT_EQ(transcript["http_status"], 200);
  EXPECT_EQ(transcript["stop_reason"], "length");
  EXPECT_EQ(transcript["truncated"], true);
  EXPECT_EQ(transcript["endpoint"], server_->origin() + "/v1/chat/completions");
  const std::string answer = transcript["answer"].get<std::string>();
  EXPECT_FALSE(answer.empty());
  EXPECT_EQ(answer.find('`'), std::string::npos) << answer;
  nlohmann::json body = nlohmann::json::parse(transcript["response_body"].get<std::string>());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], answer);
  EXPECT_EQ(body["usage"]["prompt_tokens"], usage.input_tokens());
  EXPECT_TRUE(absl::StrContains(body["model"].get<std::string>(), server_->model()))
      << body["model"];
}

TEST_F(TransformersServeTest, ClientGetsAnswersAndTheServerHonoursTheSeed) {
  std::unique_ptr<LlmClient> client = Client(Options());
  ASSERT_NE(client, nullptr);
  ChatRequest request;
  request.system = "You write CUDA kernels.";
  request.user = "Write a softmax kernel for rows of 4096 floats.";
  request.seed = 7;

  LlmCallRecord record;
  absl::StatusOr<ChatReply> first = client->Complete(request, &record);
  ASSERT_TRUE(first.ok()) << first.status() << Log();
  EXPECT_EQ(record.http_status, 200);
  ASSERT_EQ(record.attempts.size(), 1u);
  EXPECT_FALSE(first->text.empty());
  EXPECT_EQ(first->output_tokens, kMaxTokens);
  EXPECT_GT(first->input_tokens, 10);
  EXPECT_TRUE(first->truncated);
  EXPECT_EQ(first->stop_reason, "length");
  EXPECT_TRUE(absl::StrContains(first->model, server_->model())) << first->model;
  // What kforge sent is what an OpenAI-compatible server expects.
  nlohmann::json sent = nlohmann::json::parse(record.request_body);
  EXPECT_EQ(sent["seed"], 7);
  EXPECT_EQ(sent["max_tokens"], kMaxTokens);

  // The seed reaches the server: the same seed samples the same answer, another seed another.
  absl::StatusOr<ChatReply> again = client->Complete(request, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->text, first->text);
  request.seed = 8;
  absl::StatusOr<ChatReply> other = client->Complete(request, nullptr);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->text, first->text);
}

TEST_F(TransformersServeTest, UnknownModelIsAClearErrorWithoutRetries) {
  LlmOptions options = Options();
  options.model = "no-such-model";
  std::unique_ptr<LlmClient> client = Client(options);
  ASSERT_NE(client, nullptr);
  ChatRequest request;
  request.system = "s";
  request.user = "u";
  LlmCallRecord record;
  absl::StatusOr<ChatReply> reply = client->Complete(request, &record);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument) << reply.status();
  const std::string message(reply.status().message());
  // Which server refused, with its status, its own reason, and the option to fix.
  EXPECT_TRUE(absl::StrContains(message, server_->base_url())) << message;
  EXPECT_TRUE(absl::StrContains(message, "(400)")) << message;
  EXPECT_TRUE(absl::StrContains(message, "no-such-model")) << message;
  EXPECT_TRUE(absl::StrContains(message, "llm_model")) << message;
  EXPECT_EQ(record.attempts.size(), 1u) << "a 400 is not worth retrying";

  // Through the proposer: every call failed, so Propose fails with the same error.
  absl::StatusOr<std::unique_ptr<LlmProposer>> proposer = LlmProposer::Create(options, nullptr);
  ASSERT_TRUE(proposer.ok()) << proposer.status();
  absl::StatusOr<v1::ProposeResponse> response =
      (*proposer)->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_EQ((*proposer)->UsageForJob("job-test").calls(), 0);
}

TEST_F(TransformersServeTest, BaseUrlWithoutTheVersionPrefixIsNotFoundWithAHint) {
  LlmOptions options = Options();
  options.base_url = server_->origin();  // missing /v1
  std::unique_ptr<LlmClient> client = Client(options);
  ASSERT_NE(client, nullptr);
  ChatRequest request;
  request.system = "s";
  request.user = "u";
  absl::StatusOr<ChatReply> reply = client->Complete(request, nullptr);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kNotFound) << reply.status();
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "/v1")) << reply.status();
}

}  // namespace
}  // namespace kforge
