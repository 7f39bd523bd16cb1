// LlmClient: HTTP transport, retries and the concurrency limit of the LLM proposers.
#include "services/proposer/llm/llm_client.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/logging.h"
#include "common/status.h"
#include "httplib.h"
#include "services/proposer/llm/retry_policy.h"
#include "services/proposer/llm/string_view_compat.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

bool IsPublicEndpoint(const std::string& base_url) {
  return absl::StrContains(base_url, "://api.openai.com") ||
         absl::StrContains(base_url, "://api.anthropic.com");
}

// Distinct per request seed, so parallel calls of one proposal do not back off in lockstep.
uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ULL;
}

// Releases a semaphore slot on every return path.
class SlotGuard {
 public:
  explicit SlotGuard(std::counting_semaphore<>& slots) : slots_(slots) { slots_.acquire(); }
  ~SlotGuard() { slots_.release(); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  std::counting_semaphore<>& slots_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LlmClient>> LlmClient::Create(LlmOptions options) {
  KF_ASSIGN_OR_RETURN(options, ResolveLlmOptions(std::move(options)));
  KF_ASSIGN_OR_RETURN(std::string key, LoadApiKey(options));
  if (key.empty() && IsPublicEndpoint(options.base_url)) {
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeEndpoint(options), " needs an API key and none is set: set ", options.api_key_env,
        " or llm_api_key_file (or point llm_base_url at a local server)"));
  }
  return std::unique_ptr<LlmClient>(new LlmClient(std::move(options), std::move(key)));
}

LlmClient::LlmClient(LlmOptions options, std::string api_key)
    : options_(std::move(options)), api_key_(std::move(api_key)), slots_(options_.concurrency) {}

std::string LlmClient::ScrubKey(std::string_view text) const {
  if (api_key_.empty()) return std::string(text);
  return absl::StrReplaceAll(Av(text), {{api_key_, RedactSecret(api_key_)}});
}

void LlmClient::Sleep(absl::Duration duration) const {
  if (options_.sleep_for) {
    options_.sleep_for(duration);
  } else {
    absl::SleepFor(duration);
  }
}

absl::StatusOr<ChatReply> LlmClient::Complete(const ChatRequest& request,
                                              LlmCallRecord* record_out) {
  LlmCallRecord local_record;
  LlmCallRecord& record = record_out != nullptr ? *record_out : local_record;
  record = LlmCallRecord{};
  record.endpoint = absl::StrCat(ChatOrigin(options_), ChatRequestPath(options_));
  record.request_body = BuildChatRequestBody(options_, request);

  const absl::Time queued_at = absl::Now();
  SlotGuard slot(slots_);
  record.started = absl::Now();
  record.queued = record.started - queued_at;

  Backoff backoff(options_.backoff_base, options_.backoff_max,
                  MixSeed(options_.jitter_seed, request.seed));
  absl::Status last_error;
  bool last_retryable = false;
  for (int attempt_index = 0;; ++attempt_index) {
    LlmCallAttempt attempt;
    bool retryable = false;
    std::optional<absl::Duration> retry_after;
    absl::StatusOr<ChatReply> reply =
        Attempt(record.request_body, attempt, record, retryable, retry_after);
    if (reply.ok()) {
      record.attempts.push_back(attempt);
      record.total = absl::Now() - record.started;
      return reply;
    }
    last_error = reply.status();
    last_retryable = retryable;
    attempt.error = std::string(last_error.message());
    if (!retryable || attempt_index >= options_.max_retries) {
      record.attempts.push_back(attempt);
      break;
    }
    attempt.wait_after =
        retry_after.has_value() ? std::min(*retry_after, options_.max_retry_after) : backoff.Next();
    record.attempts.push_back(attempt);
    spdlog::warn("LLM call to {} failed ({}); retrying in {} (attempt {} of {})", record.endpoint,
                 std::string(last_error.message()), absl::FormatDuration(attempt.wait_after),
                 attempt_index + 2, options_.max_retries + 1);
    Sleep(attempt.wait_after);
  }
  record.total = absl::Now() - record.started;
  if (last_retryable && record.attempts.size() > 1) {
    return absl::UnavailableError(absl::StrCat(DescribeEndpoint(options_), " still failing after ",
                                               record.attempts.size(),
                                               " attempts (llm_max_retries=", options_.max_retries,
                                               "); last error: ", last_error.message()));
  }
  return last_error;
}

absl::StatusOr<ChatReply> LlmClient::Attempt(const std::string& body, LlmCallAttempt& attempt,
                                             LlmCallRecord& record, bool& retryable,
                                             std::optional<absl::Duration>& retry_after) {
  const std::string endpoint = DescribeEndpoint(options_);
  httplib::Client client(ChatOrigin(options_));
  client.set_connection_timeout(absl::ToChronoMicroseconds(options_.connect_timeout));
  client.set_read_timeout(absl::ToChronoMicroseconds(options_.read_timeout));
  client.set_write_timeout(absl::ToChronoMicroseconds(options_.write_timeout));
  httplib::Headers headers;
  for (auto& [name, value] : ChatRequestHeaders(options_, api_key_)) {
    headers.emplace(name, value);
  }

  const absl::Time start = absl::Now();
  httplib::Result result =
      client.Post(ChatRequestPath(options_), headers, body, "application/json");
  attempt.duration = absl::Now() - start;

  if (!result) {
    retryable = true;
    const httplib::Error error = result.error();
    switch (error) {
      case httplib::Error::Connection:
        return absl::UnavailableError(absl::StrCat(
            "cannot connect to ", endpoint, ": is the server running and is llm_base_url right?"));
      case httplib::Error::ConnectionTimeout:
        return absl::DeadlineExceededError(
            absl::StrCat("connecting to ", endpoint, " timed out after ",
                         absl::FormatDuration(options_.connect_timeout), " (llm_connect_timeout)"));
      case httplib::Error::Read:
        // httplib reports a read timeout and a connection cut mid-response alike; the time
        // spent tells them apart.
        if (attempt.duration >= options_.read_timeout - absl::Milliseconds(10)) {
          return absl::DeadlineExceededError(
              absl::StrCat(endpoint, " sent no complete answer within the read timeout of ",
                           absl::FormatDuration(options_.read_timeout),
                           " (timed out; raise llm_read_timeout for slow models)"));
        }
        return absl::UnavailableError(
            absl::StrCat(endpoint, " closed the connection before the full response arrived ",
                         "(truncated response, read error)"));
      case httplib::Error::Write:
        return absl::UnavailableError(
            absl::StrCat("sending the request to ", endpoint, " failed (write error)"));
      case httplib::Error::SSLConnection:
      case httplib::Error::SSLLoadingCerts:
      case httplib::Error::SSLServerVerification:
        retryable = false;
        return absl::UnavailableError(
            absl::StrCat("TLS with ", endpoint, " failed (", httplib::to_string(error),
                         "): check the URL and the system CA certificates"));
      default:
        return absl::UnavailableError(
            absl::StrCat("request to ", endpoint, " failed: ", httplib::to_string(error)));
    }
  }

  attempt.http_status = result->status;
  record.http_status = result->status;
  record.response_body = ScrubKey(result->body);
  if (result->status >= 200 && result->status < 300) {
    absl::StatusOr<ChatReply> reply = ParseChatResponse(options_, result->body);
    if (!reply.ok()) {
      // A complete 2xx body that is not the protocol will not improve on a retry.
      return absl::Status(reply.status().code(), ScrubKey(std::string(reply.status().message())));
    }
    return reply;
  }
  retryable = IsRetryableHttpStatus(result->status);
  if (result->has_header("Retry-After")) {
    retry_after = ParseRetryAfter(result->get_header_value("Retry-After"), absl::Now());
  }
  return ErrorForStatus(result->status, result->body);
}

absl::Status LlmClient::ErrorForStatus(int status, std::string_view body) const {
  const std::string endpoint = DescribeEndpoint(options_);
  const std::string said = ScrubKey(ErrorMessageFromBody(body));
  if (status == 401 || status == 403) {
    std::string what =
        api_key_.empty()
            ? absl::StrCat(endpoint, " refused the request without a key (", status, "): set ")
            : absl::StrCat(endpoint, " rejected the key (", status, "): set ");
    std::string message =
        absl::StrCat(what, options_.api_key_env, " (or llm_api_key_file) to a valid key for ",
                     options_.base_url, ". Server said: ", said);
    return status == 401 ? absl::UnauthenticatedError(message)
                         : absl::PermissionDeniedError(message);
  }
  if (status == 404) {
    return absl::NotFoundError(absl::StrCat(
        endpoint, " has no ", ChatRequestPath(options_), " or no model '", options_.model,
        "' (404): check llm_base_url (OpenAI-compatible URLs usually end in /v1) and "
        "llm_model. Server said: ",
        said));
  }
  if (status == 429) {
    return absl::ResourceExhaustedError(absl::StrCat(endpoint, " is rate-limiting (429): ", said));
  }
  if (status >= 500) {
    return absl::UnavailableError(absl::StrCat(endpoint, " failed (", status, "): ", said));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      endpoint, " refused the request (", status, "): ", said, " (check llm_model '",
      options_.model, "', llm_max_tokens ", options_.max_tokens, " and llm_max_tokens_field)"));
}

}  // namespace kforge
