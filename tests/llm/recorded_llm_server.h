// RecordedLlmServer: a real HTTP server (cpp-httplib) on a loopback port, started by a test,
// that speaks both the OpenAI chat-completions and the Anthropic Messages protocol and replays
// recorded API bodies from tests/llm/recorded/. It checks the auth headers each protocol
// expects, can delay, cut or rate-limit its replies, and counts concurrent requests.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "tests/llm/test_requests.h"

namespace kforge::testing {

struct ScriptedReply {
  ScriptedReply() = default;
  ScriptedReply(int status, std::string body, std::map<std::string, std::string> headers = {},
                absl::Duration delay = absl::ZeroDuration())
      : status(status), body(std::move(body)), headers(std::move(headers)), delay(delay) {}

  int status = 200;
  std::string body;  // "{{API_KEY}}" is replaced by the key the request carried
  std::map<std::string, std::string> headers;
  absl::Duration delay = absl::ZeroDuration();  // before answering
  // When > body size: declare this Content-Length, send the body, then drop the connection.
  size_t declared_length = 0;
};

struct SeenRequest {
  std::string path;
  std::map<std::string, std::string> headers;  // lowercased names
  std::string body;
};

class RecordedLlmServer {
 public:
  // `api_key`: the key requests must carry (Bearer for OpenAI, x-api-key for Anthropic).
  explicit RecordedLlmServer(std::string api_key);
  ~RecordedLlmServer();

  // Binds 127.0.0.1:0 and serves on a thread; returns the port.
  int Start();
  std::string OpenAiBaseUrl() const;     // http://127.0.0.1:PORT/v1
  std::string AnthropicBaseUrl() const;  // http://127.0.0.1:PORT

  // Replies in order; when none is queued, the default reply.
  void Enqueue(ScriptedReply reply);
  void SetDefault(ScriptedReply reply);
  // Each request waits (up to `timeout`) until `count` requests are in flight before it is
  // answered, so a test can see whether a concurrency limit lets more through.
  void HoldUntilConcurrent(int count, absl::Duration timeout);

  std::vector<SeenRequest> requests() const;
  int max_concurrent() const { return max_concurrent_.load(); }

 private:
  void Handle(const httplib::Request& request, httplib::Response& response, bool anthropic);
  bool HoldReached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ >= hold_count_; }

  const std::string api_key_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  absl::Notification stopping_;

  mutable absl::Mutex mu_;
  std::deque<ScriptedReply> queue_ ABSL_GUARDED_BY(mu_);
  ScriptedReply default_reply_ ABSL_GUARDED_BY(mu_);
  std::vector<SeenRequest> requests_ ABSL_GUARDED_BY(mu_);
  int hold_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration hold_timeout_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> max_concurrent_{0};
};

}  // namespace kforge::testing
