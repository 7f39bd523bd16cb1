// LlmTranscript: the record of one LLM call kept with the candidate (or rejection) it
// produced: prompt messages, sampling parameters, every HTTP attempt, the raw response, the
// answer, usage, cost and the outcome. Serialized as JSON into the store; never holds the key.
#pragma once

#include <cstdint>
#include <string>

#include "kforge/v1/proposer.pb.h"
#include "services/proposer/llm/chat_protocol.h"
#include "services/proposer/llm/llm_client.h"

namespace kforge {

struct LlmTranscript {
  std::string backend;
  std::string model;
  std::string job_id;
  std::string target_id;
  std::string parent_id;
  int call_index = 0;  // i of the request's n calls
  double temperature = 0;
  int max_tokens = 0;
  ChatRequest prompt;
  LlmCallRecord call;
  ChatReply reply;
  double cost_usd = 0;
  // "candidate", "rejected" or "failed".
  std::string outcome;
  std::string candidate_id;
  v1::Rejection rejection;
  std::string error;
};

// Pretty JSON of the transcript (schema "kforge.llm_transcript.v1").
std::string TranscriptJson(const LlmTranscript& transcript);

}  // namespace kforge
