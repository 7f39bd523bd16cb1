// LlmClient: one chat call over HTTP(S) to an OpenAI-compatible or Anthropic endpoint, with
// retries (429, 5xx, transport errors; exponential backoff with seeded jitter; Retry-After
// honoured), a concurrency limit shared by every call, and a record of every attempt for the
// transcript. The API key is only ever put in request headers; everything else it returns is
// scrubbed of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/proposer/llm/chat_protocol.h"
#include "services/proposer/llm/llm_options.h"

namespace kforge {

struct LlmCallAttempt {
  int http_status = 0;  // 0: no HTTP response (transport error)
  std::string error;    // empty on success; key-free
  absl::Duration duration;
  absl::Duration wait_after;  // backoff or Retry-After before the next attempt
};

// What happened during one Complete(): filled in even when it fails.
struct LlmCallRecord {
  std::string endpoint;       // URL of the request, no key
  std::string request_body;   // JSON sent (holds no key)
  std::string response_body;  // raw text of the last response, key-scrubbed
  int http_status = 0;        // of the last response
  std::vector<LlmCallAttempt> attempts;
  absl::Time started;
  absl::Duration queued;  // waiting for a concurrency slot
  absl::Duration total;   // from the slot to the last byte, retries included
};

class LlmClient {
 public:
  // Fills backend defaults, validates, and loads the key (file or environment). Refuses a
  // public endpoint (api.openai.com, api.anthropic.com) without a key, saying which variable
  // to set.
  static absl::StatusOr<std::unique_ptr<LlmClient>> Create(LlmOptions options);

  // One call: waits for a concurrency slot, posts, retries what is worth retrying. Errors say
  // which endpoint failed how and what to do; they never hold the key. Thread-safe.
  absl::StatusOr<ChatReply> Complete(const ChatRequest& request, LlmCallRecord* record);

  const LlmOptions& options() const { return options_; }
  bool has_key() const { return !api_key_.empty(); }
  // `text` with every occurrence of the key replaced by its redacted form.
  std::string ScrubKey(std::string_view text) const;

 private:
  LlmClient(LlmOptions options, std::string api_key);

  // One HTTP POST; fills `attempt` and the record's last response.
  // retryable and retry_after tell Complete() what to do next.
  absl::StatusOr<ChatReply> Attempt(const std::string& body, LlmCallAttempt& attempt,
                                    LlmCallRecord& record, bool& retryable,
                                    std::optional<absl::Duration>& retry_after);
  absl::Status ErrorForStatus(int status, std::string_view body) const;
  void Sleep(absl::Duration duration) const;

  const LlmOptions options_;
  const std::string api_key_;
  std::counting_semaphore<> slots_;
};

}  // namespace kforge
