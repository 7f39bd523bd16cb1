// LlmTranscript serialization.
#include "services/proposer/llm/llm_transcript.h"

#include "nlohmann/json.hpp"

namespace kforge {

std::string TranscriptJson(const LlmTranscript& t) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const LlmCallAttempt& attempt : t.call.attempts) {
    attempts.push_back({{"http_status", attempt.http_status},
                        {"error", attempt.error},
                        {"duration_s", absl::ToDoubleSeconds(attempt.duration)},
                        {"wait_after_s", absl::ToDoubleSeconds(attempt.wait_after)}});
  }
  nlohmann::json json = {
      {"schema", "kforge.llm_transcript.v1"},
      {"backend", t.backend},
      {"model", t.model},
      {"endpoint", t.call.endpoint},
      {"job_id", t.job_id},
      {"target_id", t.target_id},
      {"parent_id", t.parent_id},
      {"call_index", t.call_index},
      {"request",
       {{"temperature", t.temperature},
        {"max_tokens", t.max_tokens},
        {"seed", t.prompt.seed},
        {"messages", nlohmann::json::array({{{"role", "system"}, {"content", t.prompt.system}},
                                            {{"role", "user"}, {"content", t.prompt.user}}})}}},
      {"attempts", attempts},
      {"http_status", t.call.http_status},
      {"response_body", t.call.response_body},
      {"answer", t.reply.text},
      {"answer_model", t.reply.model},
      {"stop_reason", t.reply.stop_reason},
      {"truncated", t.reply.truncated},
      {"usage",
       {{"input_tokens", t.reply.input_tokens},
        {"output_tokens", t.reply.output_tokens},
        {"cost_usd", t.cost_usd}}},
      {"started", absl::FormatTime(absl::RFC3339_full, t.call.started, absl::UTCTimeZone())},
      {"queued_s", absl::ToDoubleSeconds(t.call.queued)},
      {"duration_s", absl::ToDoubleSeconds(t.call.total)},
      {"outcome", t.outcome},
      {"candidate_id", t.candidate_id},
      {"rejection", {{"reason", t.rejection.reason()}, {"message", t.rejection.message()}}},
      {"error", t.error},
  };
  // A cut response can end inside a UTF-8 sequence: replace, never throw.
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kforge
