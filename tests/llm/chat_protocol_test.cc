// Wire protocols: request bodies and headers, recorded response bodies of both APIs.
#include "services/proposer/llm/chat_protocol.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/llm/test_requests.h"

namespace kforge {
namespace {

using testing::ReadRecorded;

LlmOptions Resolved(const std::string& backend, const std::string& base_url = "") {
  LlmOptions options;
  options.backend = backend;
  options.base_url = base_url;
  absl::StatusOr<LlmOptions> resolved = ResolveLlmOptions(options);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

TEST(ChatProtocolTest, OpenAiRequestGoesToChatCompletionsUnderTheBaseUrl) {
  LlmOptions options = Resolved("openai", "http://127.0.0.1:8000/v1/");
  EXPECT_EQ(ChatOrigin(options), "http://127.0.0.1:8000");
  EXPECT_EQ(ChatRequestPath(options), "/v1/chat/completions");
  EXPECT_EQ(ChatRequestPath(Resolved("openai")), "/v1/chat/completions");
  EXPECT_EQ(ChatOrigin(Resolved("openai")), "https://api.openai.com");
  EXPECT_EQ(ChatRequestPath(Resolved("openai", "http://localhost:11434")), "/chat/completions");
}

TEST(ChatProtocolTest, AnthropicRequestGoesToV1Messages) {
  LlmOptions options = Resolved("anthropic");
  EXPECT_EQ(ChatOrigin(options), "https://api.anthropic.com");
  EXPECT_EQ(ChatRequestPath(options), "/v1/messages");
}

TEST(ChatProtocolTest, OpenAiBodyHasSystemAndUserMessagesAndSampling) {
  LlmOptions options = Resolved("openai");
  options.model = "qwen2.5-coder";
  options.temperature = 0.2;
  options.max_tokens = 1000;
  nlohmann::json body =
      nlohmann::json::parse(BuildChatRequestBody(options, {"SYSTEM", "USER", 99}));
  EXPECT_EQ(body["model"], "qwen2.5-coder");
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][0]["content"], "SYSTEM");
  EXPECT_EQ(body["messages"][1]["role"], "user");
  EXPECT_EQ(body["messages"][1]["content"], "USER");
  EXPECT_EQ(body["max_tokens"], 1000);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.2);
  EXPECT_EQ(body["seed"], 99);
  EXPECT_EQ(body["stream"], false);
  options.max_tokens_field = "max_completion_tokens";
  body = nlohmann::json::parse(BuildChatRequestBody(options, {"S", "U", 0}));
  EXPECT_EQ(body["max_completion_tokens"], 1000);
  EXPECT_FALSE(body.contains("max_tokens"));
}

TEST(ChatProtocolTest, AnthropicBodyHasTopLevelSystemAndClampedTemperature) {
  LlmOptions options = Resolved("anthropic");
  options.temperature = 1.5;
  nlohmann::json body = nlohmann::json::parse(BuildChatRequestBody(options, {"SYS", "USR", 1}));
  EXPECT_EQ(body["system"], "SYS");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "USR");
  EXPECT_EQ(body["max_tokens"], options.max_tokens);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 1.0);
}

TEST(ChatProtocolTest, HeadersCarryTheKeyTheWayEachApiWantsIt) {
  auto openai = ChatRequestHeaders(Resolved("openai"), "sk-abc");
  EXPECT_NE(std::find(openai.begin(), openai.end(),
                      std::pair<std::string, std::string>("Authorization", "Bearer sk-abc")),
            openai.end());
  auto anthropic = ChatRequestHeaders(Resolved("anthropic"), "sk-ant");
  EXPECT_NE(std::find(anthropic.begin(), anthropic.end(),
                      std::pair<std::string, std::string>("x-api-key", "sk-ant")),
            anthropic.end());
  EXPECT_NE(std::find(anthropic.begin(), anthropic.end(),
                      std::pair<std::string, std::string>("anthropic-version", "2023-06-01")),
            anthropic.end());
  // No key (a local server): no auth header at all.
  for (const auto& [name, value] : ChatRequestHeaders(Resolved("openai"), "")) {
    EXPECT_NE(name, "Authorization");
  }
}

TEST(ChatProtocolTest, ParsesRecordedOpenAiAnswer) {
  absl::StatusOr<ChatReply> reply =
      ParseChatResponse(Resolved("openai"), ReadRecorded("openai_good.json"));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_NE(reply->text.find("```cuda"), std::string::npos);
  EXPECT_EQ(reply->input_tokens, 1234);
  EXPECT_EQ(reply->output_tokens, 567);
  EXPECT_EQ(reply->model, "gpt-4.1-2025-04-14");
  EXPECT_FALSE(reply->truncated);
}

TEST(ChatProtocolTest, ParsesRecordedAnthropicAnswers) {
  absl::StatusOr<ChatReply> reply =
      ParseChatResponse(Resolved("anthropic"), ReadRecorded("anthropic_good.json"));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_NE(reply->text.find("```json"), std::string::npos);
  EXPECT_EQ(reply->input_tokens, 2345);
  EXPECT_EQ(reply->output_tokens, 678);
  absl::StatusOr<ChatReply> cut =
      ParseChatResponse(Resolved("anthropic"), ReadRecorded("anthropic_max_tokens.json"));
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->truncated);
}

TEST(ChatProtocolTest, ParsesARefusal) {
  absl::StatusOr<ChatReply> reply =
      ParseChatResponse(Resolved("openai"), ReadRecorded("openai_refusal.json"));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->text.empty());
  EXPECT_EQ(reply->refusal, "I can't help with that request.");
}

TEST(ChatProtocolTest, CutOrForeignBodiesAreClearErrors) {
  const std::string good = ReadRecorded("openai_good.json");
  absl::StatusOr<ChatReply> cut =
      ParseChatResponse(Resolved("openai"), good.substr(0, good.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("not complete JSON"), std::string::npos);
  absl::StatusOr<ChatReply> html =
      ParseChatResponse(Resolved("openai"), "<html><body>502 Bad Gateway</body></html>");
  ASSERT_FALSE(html.ok());
  EXPECT_NE(html.status().message().find("502 Bad Gateway"), std::string::npos);
  // An Anthropic body sent to an OpenAI client names what is missing.
  absl::StatusOr<ChatReply> foreign =
      ParseChatResponse(Resolved("openai"), ReadRecorded("anthropic_good.json"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("no choices"), std::string::npos);
}

TEST(ChatProtocolTest, ErrorMessagesComeFromEitherApisErrorBody) {
  EXPECT_EQ(ErrorMessageFromBody(ReadRecorded("anthropic_529.json")),
            "overloaded_error: Overloaded");
  EXPECT_NE(ErrorMessageFromBody(ReadRecorded("openai_429.json")).find("Rate limit reached"),
            std::string::npos);
  EXPECT_EQ(ErrorMessageFromBody("plain text"), "plain text");
}

}  // namespace
}  // namespace kforge
