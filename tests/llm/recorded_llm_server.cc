// RecordedLlmServer: loopback replay server for the LLM proposer's integration tests.
#include "tests/llm/recorded_llm_server.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/http_listen.h"

namespace kforge::testing {
namespace {

std::string OpenAiError(const std::string& message, const std::string& code) {
  return absl::StrCat(R"({"error": {"message": ")", message,
                      R"(", "type": "invalid_request_error", "param": null, "code": ")", code,
                      R"("}})");
}

std::string AnthropicError(const std::string& type, const std::string& message) {
  return absl::StrCat(R"({"type": "error", "error": {"type": ")", type, R"(", "message": ")",
                      message, R"("}})");
}

}  // namespace

RecordedLlmServer::RecordedLlmServer(std::string api_key) : api_key_(std::move(api_key)) {
  default_reply_.status = 500;
  default_reply_.body = R"({"error": {"message": "no scripted reply left", "type": "test"}})";
}

RecordedLlmServer::~RecordedLlmServer() {
  stopping_.Notify();
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

int RecordedLlmServer::Start() {
  server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res, /*anthropic=*/false);
  });
  server_.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res, /*anthropic=*/true);
  });
  // Enough handler threads that a broken concurrency limit would show.
  server_.new_task_queue = [] { return new httplib::ThreadPool(16); };
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = ListenInBackground(server_);
  return port_;
}

std::string RecordedLlmServer::OpenAiBaseUrl() const {
  return absl::StrCat("http://127.0.0.1:", port_, "/v1");
}

std::string RecordedLlmServer::AnthropicBaseUrl() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

void RecordedLlmServer::Enqueue(ScriptedReply reply) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(reply));
}

void RecordedLlmServer::SetDefault(ScriptedReply reply) {
  absl::MutexLock lock(&mu_);
  default_reply_ = std::move(reply);
}

void RecordedLlmServer::HoldUntilConcurrent(int count, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  hold_count_ = count;
  hold_timeout_ = timeout;
}

std::vector<SeenRequest> RecordedLlmServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void RecordedLlmServer::Handle(const httplib::Request& request, httplib::Response& response,
                               bool anthropic) {
  SeenRequest seen;
  seen.path = request.path;
  seen.body = request.body;
  for (const auto& [name, value] : request.headers) {
    seen.headers[absl::AsciiStrToLower(name)] = value;
  }
  ScriptedReply reply;
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(seen);
    ++in_flight_;
    int observed = in_flight_;
    int previous = max_concurrent_.load();
    while (observed > previous && !max_concurrent_.compare_exchange_weak(previous, observed)) {
    }
    if (hold_count_ > 0) {
      mu_.AwaitWithTimeout(absl::Condition(this, &RecordedLlmServer::HoldReached), hold_timeout_);
    }
    if (!queue_.empty()) {
      reply = std::move(queue_.front());
      queue_.pop_front();
    } else {
      reply = default_reply_;
    }
  }

  // The auth each protocol really checks.
  std::string presented;
  if (anthropic) {
    presented = seen.headers["x-api-key"];
    if (seen.headers["anthropic-version"].empty()) {
      reply = {400,
               AnthropicError("invalid_request_error", "anthropic-version: header is required")};
    } else if (presented != api_key_) {
      reply = {401, ReadRecorded("anthropic_401.json")};
    }
  } else {
    const std::string auth = seen.headers["authorization"];
    presented = absl::StartsWith(auth, "Bearer ") ? auth.substr(7) : "";
    if (presented != api_key_) {
      reply = {401, presented.empty() ? OpenAiError("You didn't provide an API key.", "")
                                      : ReadRecorded("openai_401.json")};
    }
  }

  if (reply.delay > absl::ZeroDuration()) stopping_.WaitForNotificationWithTimeout(reply.delay);
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }

  std::string body = absl::StrReplaceAll(reply.body, {{"{{API_KEY}}", presented}});
  response.status = reply.status;
  for (const auto& [name, value] : reply.headers) response.set_header(name, value);
  if (reply.declared_length > body.size()) {
    // Promise more than is sent, then hang up: a body cut in transit.
    auto shared = std::make_shared<std::string>(std::move(body));
    response.set_content_provider(
        reply.declared_length, "application/json",
        [shared](size_t offset, size_t, httplib::DataSink& sink) {
          if (offset < shared->size()) {
            sink.write(shared->data() + offset, shared->size() - offset);
            return true;
          }
          return false;  // abort: the connection closes short of Content-Length
        });
    return;
  }
  response.set_content(body, "application/json");
}

}  // namespace kforge::testing
