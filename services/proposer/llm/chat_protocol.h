// The two wire protocols an LLM proposer speaks: OpenAI-compatible chat completions and the
// Anthropic Messages API. Pure functions from a one-turn chat to a request body and from a
// response body to the answer text and token usage; the HTTP client does the transport.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/proposer/llm/llm_options.h"

namespace kforge {

// One turn: a system prompt and one user message.
struct ChatRequest {
  std::string system;
  std::string user;
  uint64_t seed = 0;  // sent where the protocol has a seed (OpenAI-compatible servers)
};

struct ChatReply {
  std::string text;   // the model's answer (text blocks joined)
  std::string model;  // the model the server says answered
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  bool truncated = false;  // stopped at max_tokens
  std::string stop_reason;
  std::string refusal;  // the model declined (OpenAI "refusal"), if it did
};

// "OpenAI-compatible server at URL" / "Anthropic API at URL", for messages.
std::string DescribeEndpoint(const LlmOptions& options);

// The path under base_url's origin that requests go to ("/v1/chat/completions").
std::string ChatRequestPath(const LlmOptions& options);
// Origin of base_url ("https://api.openai.com"), what the HTTP client connects to.
std::string ChatOrigin(const LlmOptions& options);

std::string BuildChatRequestBody(const LlmOptions& options, const ChatRequest& request);

// Request headers, the key among them (so never log these).
std::vector<std::pair<std::string, std::string>> ChatRequestHeaders(const LlmOptions& options,
                                                                    const std::string& api_key);

// The answer of a 2xx response. DataLoss for a body that is not the protocol's JSON (a cut
// body, a proxy's HTML page), naming the endpoint and quoting the start of the body.
absl::StatusOr<ChatReply> ParseChatResponse(const LlmOptions& options, std::string_view body);

// The server's own explanation in an error body ({"error": {"message": ...}} in both
// protocols), else the start of the body.
std::string ErrorMessageFromBody(std::string_view body);

}  // namespace kforge
