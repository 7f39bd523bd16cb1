// LlmProposer against a real HTTP server on loopback that replays recorded OpenAI and
// Anthropic bodies: candidates, rejections, usage and cost, transcripts, retries, timeouts,
// cut bodies, auth failures and the concurrency limit.
#include "services/proposer/llm/llm_proposer.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/local_store.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/response_parser.h"
#include "tests/llm/recorded_llm_server.h"
#include "tests/llm/test_requests.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using testing::ReadRecorded;
using testing::RecordedLlmServer;
using testing::ScriptedReply;

constexpr char kKey[] = "sk-test-9f8e7d6c5b4a3210TOPSECRET";
constexpr char kKeyEnv[] = "KFORGE_TEST_LLM_KEY";

// Waits the client asked for between retries; it still really sleeps.
class SleepRecorder {
 public:
  std::function<void(absl::Duration)> Hook() {
    return [this](absl::Duration d) {
      {
        absl::MutexLock lock(&mu_);
        waits_.push_back(d);
      }
      absl::SleepFor(d);
    };
  }
  std::vector<absl::Duration> waits() const {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> waits_;
};

class LlmProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv(kKeyEnv, kKey, 1), 0);
    ASSERT_GT(server_.Start(), 0);
    absl::StatusOr<std::unique_ptr<LocalStore>> store = LocalStore::Create(dir_.str());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  LlmOptions Options(const std::string& backend) {
    LlmOptions options;
    options.backend = backend;
    options.base_url =
        backend == "anthropic" ? server_.AnthropicBaseUrl() : server_.OpenAiBaseUrl();
    options.model = "test-model";
    options.api_key_env = kKeyEnv;
    options.max_retries = 2;
    options.backoff_base = absl::Milliseconds(20);
    options.backoff_max = absl::Milliseconds(200);
    options.read_timeout = absl::Seconds(20);
    options.price_input_per_mtok = 2.0;
    options.price_output_per_mtok = 8.0;
    options.sleep_for = sleeps_.Hook();
    return options;
  }

  std::unique_ptr<LlmProposer> Make(const LlmOptions& options, bool with_store = true) {
    absl::StatusOr<std::unique_ptr<LlmProposer>> proposer =
        LlmProposer::Create(options, with_store ? store_.get() : nullptr);
    EXPECT_TRUE(proposer.ok()) << proposer.status();
    return proposer.ok() ? std::move(*proposer) : nullptr;
  }

  static void ExpectNoKey(const std::string& text) {
    EXPECT_EQ(text.find(kKey), std::string::npos) << "the API key leaked into: " << text;
  }

  RecordedLlmServer server_{kKey};
  TempDir dir_;
  std::unique_ptr<LocalStore> store_;
  SleepRecorder sleeps_;
};

TEST_F(LlmProposerTest, OpenAiAnswerBecomesACandidateWithUsageCostAndTranscript) {
  server_.Enqueue({200, ReadRecorded("openai_good.json")});
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  EXPECT_EQ(proposer->Name(), "openai");

  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->candidates_size(), 1) << response->DebugString();
  EXPECT_EQ(response->rejections_size(), 0);
  const v1::Candidate& candidate = response->candidates(0);
  EXPECT_NE(candidate.source().find("extern \"C\" __global__ void __launch_bounds__(128) "
                                    "kf_softmax_rows(KfArgs args)"),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(candidate.launch_plan_json())["launches"][0]["entry"],
            "kf_softmax_rows");
  EXPECT_EQ(candidate.id(), CandidateId(candidate.source(), candidate.launch_plan_json()));
  EXPECT_EQ(candidate.proposer(), "openai:test-model");

  // Usage and cost: tokens * price per million.
  EXPECT_EQ(response->usage().calls(), 1);
  EXPECT_EQ(response->usage().input_tokens(), 1234);
  EXPECT_EQ(response->usage().output_tokens(), 567);
  EXPECT_DOUBLE_EQ(response->usage().cost_usd(), (1234 * 2.0 + 567 * 8.0) / 1e6);
  EXPECT_EQ(proposer->UsageForJob("job-test").input_tokens(), 1234);

  // What the server saw: the protocol, the key in the header, the prompt in the body.
  std::vector<testing::SeenRequest> requests = server_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/v1/chat/completions");
  EXPECT_EQ(requests[0].headers["authorization"], std::string("Bearer ") + kKey);
  nlohmann::json body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_NE(body["messages"][1]["content"].get<std::string>().find("aten::softmax.int"),
            std::string::npos);

  // The transcript is a blob in the store, referenced by the candidate, without the key.
  ASSERT_FALSE(candidate.transcript().sha256().empty());
  absl::StatusOr<std::string> transcript = GetBlob(*store_, candidate.transcript());
  ASSERT_TRUE(transcript.ok()) << transcript.status();
  nlohmann::json record = nlohmann::json::parse(*transcript);
  EXPECT_EQ(record["schema"], "kforge.llm_transcript.v1");
  EXPECT_EQ(record["outcome"], "candidate");
  EXPECT_EQ(record["candidate_id"], candidate.id());
  EXPECT_EQ(record["http_status"], 200);
  EXPECT_EQ(record["usage"]["input_tokens"], 1234);
  EXPECT_NE(
      record["request"]["messages"][1]["content"].get<std::string>().find("sizes [8, 128, 4096]"),
      std::string::npos);
  EXPECT_NE(record["response_body"].get<std::string>().find("chatcmpl-"), std::string::npos);
  ExpectNoKey(*transcript);
}

TEST_F(LlmProposerTest, AnthropicAnswerBecomesACandidate) {
  server_.Enqueue({200, ReadRecorded("anthropic_good.json")});
  auto proposer = Make(Options("anthropic"));
  ASSERT_NE(proposer, nullptr);
  EXPECT_EQ(proposer->Name(), "anthropic");
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxChildRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->candidates_size(), 1) << response->DebugString();
  EXPECT_EQ(response->candidates(0).parent_id(), "parent-id-1");
  EXPECT_EQ(response->candidates(0).proposer(), "anthropic:test-model");
  EXPECT_EQ(response->usage().input_tokens(), 2345);
  EXPECT_EQ(response->usage().output_tokens(), 678);

  std::vector<testing::SeenRequest> requests = server_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/v1/messages");
  EXPECT_EQ(requests[0].headers["x-api-key"], kKey);
  EXPECT_EQ(requests[0].headers["anthropic-version"], "2023-06-01");
  nlohmann::json body = nlohmann::json::parse(requests[0].body);
  EXPECT_NE(body["system"].get<std::string>().find("typedef struct KfArgs"), std::string::npos);
  EXPECT_NE(body["messages"][0]["content"].get<std::string>().find("PARENT_SOURCE_MARKER"),
            std::string::npos);

  absl::StatusOr<std::string> transcript = GetBlob(*store_, response->candidates(0).transcript());
  ASSERT_TRUE(transcript.ok()) << transcript.status();
  ExpectNoKey(*transcript);
}

TEST_F(LlmProposerTest, MalformedAnswersComeBackAsRejectionsWithTheirReason) {
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
      {"openai_refusal.json", kRejectRefused},
  };
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  for (const auto& [file, reason] : cases) {
    server_.Enqueue({200, ReadRecorded(file)});
    absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
    ASSERT_TRUE(response.ok()) << file << ": " << response.status();
    EXPECT_EQ(response->candidates_size(), 0) << file;
    ASSERT_EQ(response->rejections_size(), 1) << file;
    EXPECT_EQ(response->rejections(0).reason(), reason) << file;
    EXPECT_FALSE(response->rejections(0).message().empty());
    ExpectNoKey(response->rejections(0).message());
    EXPECT_EQ(response->usage().calls(), 1) << "a rejected answer is still billed";
  }
  EXPECT_EQ(proposer->UsageForJob("job-test").calls(), std::size(cases));
}

TEST_F(LlmProposerTest, AnthropicHostCodeAndCutAnswersAreRejected) {
  auto proposer = Make(Options("anthropic"));
  ASSERT_NE(proposer, nullptr);
  server_.Enqueue({200, ReadRecorded("anthropic_host_code.json")});
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->rejections_size(), 1);
  EXPECT_EQ(response->rejections(0).reason(), kRejectHostCode);

  server_.Enqueue({200, ReadRecorded("anthropic_max_tokens.json")});
  response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->rejections_size(), 1);
  EXPECT_EQ(response->rejections(0).reason(), kRejectUnterminatedBlock);
  EXPECT_NE(response->rejections(0).message().find("token limit"), std::string::npos);
}

TEST_F(LlmProposerTest, KeyEchoedByTheServerIsScrubbedFromTranscripts) {
  server_.Enqueue({200, ReadRecorded("openai_echoes_key.json")});
  auto proposer = Make(Options("openai"), /*with_store=*/false);
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->candidates_size(), 1);
  // No store: the transcript is kept in memory.
  absl::StatusOr<std::string> transcript =
      proposer->Transcript(response->candidates(0).transcript());
  ASSERT_TRUE(transcript.ok()) << transcript.status();
  ExpectNoKey(*transcript);
  EXPECT_NE(transcript->find(RedactSecret(kKey)), std::string::npos);
}

TEST_F(LlmProposerTest, RateLimitIsRetriedAfterTheServersRetryAfter) {
  server_.Enqueue({429, ReadRecorded("openai_429.json"), {{"Retry-After", "1"}}});
  server_.Enqueue({200, ReadRecorded("openai_good.json")});
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates_size(), 1);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(sleeps_.waits(), std::vector<absl::Duration>{absl::Seconds(1)});

  // The transcript records both attempts and the wait.
  nlohmann::json record =
      nlohmann::json::parse(*GetBlob(*store_, response->candidates(0).transcript()));
  ASSERT_EQ(record["attempts"].size(), 2u);
  EXPECT_EQ(record["attempts"][0]["http_status"], 429);
  EXPECT_DOUBLE_EQ(record["attempts"][0]["wait_after_s"].get<double>(), 1.0);
  EXPECT_EQ(record["attempts"][1]["http_status"], 200);
}

TEST_F(LlmProposerTest, OverloadedAnthropicIsRetriedWithJitteredBackoff) {
  server_.Enqueue({529, ReadRecorded("anthropic_529.json")});
  server_.Enqueue({200, ReadRecorded("anthropic_good.json")});
  auto proposer = Make(Options("anthropic"));
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates_size(), 1);
  std::vector<absl::Duration> waits = sleeps_.waits();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_GE(waits[0], absl::Milliseconds(10));
  EXPECT_LE(waits[0], absl::Milliseconds(20));
}

TEST_F(LlmProposerTest, ServerErrorsUntilRetriesAreExhaustedGiveAClearError) {
  server_.SetDefault({500, ReadRecorded("openai_500.json")});
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(response.status().message());
  EXPECT_NE(message.find("still failing after 3 attempts"), std::string::npos) << message;
  EXPECT_NE(message.find("(500)"), std::string::npos) << message;
  EXPECT_NE(message.find("The server had an error"), std::string::npos) << message;
  EXPECT_EQ(server_.requests().size(), 3u);
  EXPECT_EQ(sleeps_.waits().size(), 2u);
  EXPECT_EQ(proposer->UsageForJob("job-test").calls(), 0);
}

TEST_F(LlmProposerTest, RejectedKeyIsNotRetriedAndTheErrorSaysWhatToSet) {
  const std::string wrong_key = "sk-wrong-0123456789abcdefWRONG";
  ASSERT_EQ(setenv(kKeyEnv, wrong_key.c_str(), 1), 0);
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnauthenticated);
  const std::string message(response.status().message());
  EXPECT_NE(message.find("OpenAI-compatible server at " + server_.OpenAiBaseUrl() +
                         " rejected the key (401): set KFORGE_TEST_LLM_KEY"),
            std::string::npos)
      << message;
  // The server echoed the key in its error body; the error must not carry it.
  EXPECT_NE(message.find("Incorrect API key provided"), std::string::npos) << message;
  EXPECT_EQ(message.find(wrong_key), std::string::npos) << message;
  EXPECT_EQ(server_.requests().size(), 1u);
  EXPECT_TRUE(sleeps_.waits().empty());

  auto anthropic = Make(Options("anthropic"));
  ASSERT_NE(anthropic, nullptr);
  response = anthropic->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(response.status().message().find("Anthropic API at"), std::string::npos);
  EXPECT_NE(response.status().message().find("invalid x-api-key"), std::string::npos);
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(LlmProposerTest, ReadTimeoutIsAClearError) {
  server_.Enqueue({200, ReadRecorded("openai_good.json"), {}, absl::Seconds(30)});
  LlmOptions options = Options("openai");
  options.read_timeout = absl::Milliseconds(300);
  options.max_retries = 0;
  auto proposer = Make(options);
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(response.status().message().find("timed out"), std::string::npos) << response.status();
  EXPECT_NE(response.status().message().find("llm_read_timeout"), std::string::npos);
}

TEST_F(LlmProposerTest, BodyCutShortOfContentLengthIsRetriedThenAClearError) {
  const std::string good = ReadRecorded("openai_good.json");
  ScriptedReply cut{200, good.substr(0, 200)};
  cut.declared_length = good.size();
  server_.SetDefault(cut);
  LlmOptions options = Options("openai");
  options.max_retries = 1;
  auto proposer = Make(options);
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.status().message().find("truncated"), std::string::npos) << response.status();
  EXPECT_NE(response.status().message().find("after 2 attempts"), std::string::npos)
      << response.status();
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(LlmProposerTest, CutJsonWithAConsistentLengthIsAClearErrorWithoutRetry) {
  const std::string good = ReadRecorded("openai_good.json");
  server_.Enqueue({200, good.substr(0, good.size() / 2)});
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(response.status().message().find("not complete JSON"), std::string::npos)
      << response.status();
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(LlmProposerTest, ConcurrencyLimitBoundsCallsInFlight) {
  // Each request waits until two are in flight (or 10 s), then answers after 100 ms: a
  // limit of two shows exactly two at once; a broken limit would show all six.
  server_.HoldUntilConcurrent(2, absl::Seconds(10));
  server_.SetDefault({200, ReadRecorded("openai_good.json"), {}, absl::Milliseconds(100)});
  LlmOptions options = Options("openai");
  options.concurrency = 2;
  auto proposer = Make(options);
  ASSERT_NE(proposer, nullptr);
  v1::ProposeRequest request = testing::SoftmaxRootRequest();
  request.set_n(6);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(server_.requests().size(), 6u);
  EXPECT_EQ(server_.max_concurrent(), 2);
  EXPECT_EQ(response->usage().calls(), 6);
  EXPECT_EQ(response->usage().input_tokens(), 6 * 1234);
  // Six identical answers are one candidate.
  EXPECT_EQ(response->candidates_size(), 1);
  // Every call had its own seed.
  std::set<int64_t> seeds;
  for (const testing::SeenRequest& seen : server_.requests()) {
    seeds.insert(nlohmann::json::parse(seen.body)["seed"].get<int64_t>());
  }
  EXPECT_EQ(seeds, (std::set<int64_t>{42, 43, 44, 45, 46, 47}));
}

TEST_F(LlmProposerTest, OneFailedCallBesideAGoodOneIsACallFailedRejection) {
  server_.Enqueue({200, ReadRecorded("openai_good.json")});
  server_.Enqueue(
      {400,
       R"({"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}})"});
  auto proposer = Make(Options("openai"));
  ASSERT_NE(proposer, nullptr);
  v1::ProposeRequest request = testing::SoftmaxRootRequest();
  request.set_n(2);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates_size(), 1);
  ASSERT_EQ(response->rejections_size(), 1);
  EXPECT_EQ(response->rejections(0).reason(), kRejectCallFailed);
  EXPECT_NE(response->rejections(0).message().find("max_tokens is too large"), std::string::npos);
  EXPECT_EQ(server_.requests().size(), 2u) << "a 400 is not retried";
}

TEST_F(LlmProposerTest, UnreachableServerIsAClearError) {
  LlmOptions options = Options("openai");
  options.base_url = "http://127.0.0.1:" + std::to_string(FreeLoopbackPort()) + "/v1";
  options.max_retries = 0;
  auto proposer = Make(options);
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.status().message().find("cannot connect"), std::string::npos)
      << response.status();
}

TEST_F(LlmProposerTest, HttpsEndpointsGoThroughTls) {
  // Nothing listens there: the TLS client is built and reports the refused connection (a
  // build without TLS support would refuse the https scheme itself).
  LlmOptions options = Options("anthropic");
  options.base_url = "https://127.0.0.1:" + std::to_string(FreeLoopbackPort());
  options.max_retries = 0;
  auto proposer = Make(options);
  ASSERT_NE(proposer, nullptr);
  absl::StatusOr<v1::ProposeResponse> response = proposer->Propose(testing::SoftmaxRootRequest());
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.status().message().find("cannot connect to Anthropic API at https://"),
            std::string::npos)
      << response.status();
}

TEST_F(LlmProposerTest, PublicEndpointWithoutAKeyIsRefusedUpFront) {
  unsetenv("KFORGE_TEST_NO_SUCH_KEY");
  LlmOptions options;
  options.backend = "anthropic";
  options.api_key_env = "KFORGE_TEST_NO_SUCH_KEY";
  absl::StatusOr<std::unique_ptr<Proposer>> proposer = MakeLlmProposer(options, nullptr);
  ASSERT_FALSE(proposer.ok());
  EXPECT_EQ(proposer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(proposer.status().message().find("KFORGE_TEST_NO_SUCH_KEY"), std::string::npos);
}

}  // namespace
}  // namespace kforge
