// OpenAI-compatible chat completions and Anthropic Messages: bodies, headers, answers.
#include "services/proposer/llm/chat_protocol.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/string_view_compat.h"

namespace kforge {
namespace {

using nlohmann::json;

constexpr size_t kQuoteChars = 300;

std::string Quote(std::string_view body) {
  if (body.size() <= kQuoteChars) return std::string(body);
  return absl::StrCat(Av(body.substr(0, kQuoteChars)), "... (", body.size(), " bytes)");
}

bool IsAnthropic(const LlmOptions& options) { return options.backend == "anthropic"; }

// Position where base_url's path starts (after scheme://host[:port]).
size_t PathStart(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const size_t slash = url.find('/', host_start);
  return slash == std::string::npos ? url.size() : slash;
}

int64_t IntOr(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return 0;
  return it->get<int64_t>();
}

std::string StringOr(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

absl::Status NotProtocol(const LlmOptions& options, std::string_view what, std::string_view body) {
  return absl::DataLossError(absl::StrCat(DescribeEndpoint(options), " answered with ", Av(what),
                                          ": ", Quote(body),
                                          " (check llm_base_url and llm_backend)"));
}

absl::StatusOr<ChatReply> ParseOpenAi(const LlmOptions& options, const json& body,
                                      std::string_view raw) {
  ChatReply reply;
  reply.model = StringOr(body, "model");
  auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return NotProtocol(options, "no choices", raw);
  }
  const json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return NotProtocol(options, "a choice without a message", raw);
  }
  auto content = message->find("content");
  if (content != message->end() && content->is_string()) {
    reply.text = content->get<std::string>();
  } else if (content != message->end() && content->is_array()) {
    // Some servers send content parts: [{"type": "text", "text": ...}].
    for (const json& part : *content) {
      if (part.is_object()) reply.text += StringOr(part, "text");
    }
  }
  reply.refusal = StringOr(*message, "refusal");
  reply.stop_reason = StringOr(choice, "finish_reason");
  reply.truncated = reply.stop_reason == "length";
  auto usage = body.find("usage");
  if (usage != body.end() && usage->is_object()) {
    reply.input_tokens = IntOr(*usage, "prompt_tokens");
    reply.output_tokens = IntOr(*usage, "completion_tokens");
  }
  return reply;
}

absl::StatusOr<ChatReply> ParseAnthropic(const LlmOptions& options, const json& body,
                                         std::string_view raw) {
  ChatReply reply;
  reply.model = StringOr(body, "model");
  auto content = body.find("content");
  if (content == body.end() || !content->is_array()) {
    return NotProtocol(options, "a message without content", raw);
  }
  // Text blocks only: thinking and tool blocks are not the answer.
  for (const json& block : *content) {
    if (block.is_object() && StringOr(block, "type") == "text") {
      reply.text += StringOr(block, "text");
    }
  }
  reply.stop_reason = StringOr(body, "stop_reason");
  reply.truncated = reply.stop_reason == "max_tokens";
  if (reply.stop_reason == "refusal") reply.refusal = "the model declined to answer";
  auto usage = body.find("usage");
  if (usage != body.end() && usage->is_object()) {
    reply.input_tokens = IntOr(*usage, "input_tokens") +
                         IntOr(*usage, "cache_creation_input_tokens") +
                         IntOr(*usage, "cache_read_input_tokens");
    reply.output_tokens = IntOr(*usage, "output_tokens");
  }
  return reply;
}

}  // namespace

std::string DescribeEndpoint(const LlmOptions& options) {
  return absl::StrCat(IsAnthropic(options) ? "Anthropic API" : "OpenAI-compatible server", " at ",
                      options.base_url);
}

std::string ChatRequestPath(const LlmOptions& options) {
  std::string prefix = options.base_url.substr(PathStart(options.base_url));
  return absl::StrCat(prefix, IsAnthropic(options) ? "/v1/messages" : "/chat/completions");
}

std::string ChatOrigin(const LlmOptions& options) {
  return options.base_url.substr(0, PathStart(options.base_url));
}

std::string BuildChatRequestBody(const LlmOptions& options, const ChatRequest& request) {
  json body;
  body["model"] = options.model;
  if (IsAnthropic(options)) {
    body["max_tokens"] = options.max_tokens;
    body["system"] = request.system;
    body["messages"] = json::array({{{"role", "user"}, {"content", request.user}}});
    // The Messages API takes temperatures in [0, 1].
    body["temperature"] = std::min(options.temperature, 1.0);
  } else {
    body["messages"] = json::array({{{"role", "system"}, {"content", request.system}},
                                    {{"role", "user"}, {"content", request.user}}});
    body[options.max_tokens_field] = options.max_tokens;
    body["temperature"] = options.temperature;
    body["seed"] = request.seed;
    body["stream"] = false;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::pair<std::string, std::string>> ChatRequestHeaders(const LlmOptions& options,
                                                                    const std::string& api_key) {
  std::vector<std::pair<std::string, std::string>> headers = {
      {"Accept", "application/json"}, {"User-Agent", "kforge-llm-proposer/0.1"}};
  if (IsAnthropic(options)) {
    headers.emplace_back("anthropic-version", options.anthropic_version);
    if (!api_key.empty()) headers.emplace_back("x-api-key", api_key);
  } else if (!api_key.empty()) {
    headers.emplace_back("Authorization", absl::StrCat("Bearer ", api_key));
  }
  return headers;
}

absl::StatusOr<ChatReply> ParseChatResponse(const LlmOptions& options, std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return NotProtocol(options, "a body that is not complete JSON (cut off?)", body);
  }
  if (!parsed.is_object()) return NotProtocol(options, "JSON that is not an object", body);
  if (auto error = parsed.find("error"); error != parsed.end() && !error->is_null()) {
    return absl::UnavailableError(absl::StrCat(DescribeEndpoint(options),
                                               " reported an error: ", ErrorMessageFromBody(body)));
  }
  return IsAnthropic(options) ? ParseAnthropic(options, parsed, body)
                              : ParseOpenAi(options, parsed, body);
}

std::string ErrorMessageFromBody(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    auto error = parsed.find("error");
    if (error != parsed.end()) {
      if (error->is_string()) return error->get<std::string>();
      if (error->is_object()) {
        std::string message = StringOr(*error, "message");
        std::string type = StringOr(*error, "type");
        if (!message.empty()) return type.empty() ? message : absl::StrCat(type, ": ", message);
      }
    }
    if (std::string message = StringOr(parsed, "message"); !message.empty()) return message;
  }
  return Quote(body);
}

}  // namespace kforge
