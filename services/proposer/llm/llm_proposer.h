// LlmProposer: the Proposer of the LLM backends ("openai": any OpenAI-compatible server,
// "anthropic": the Messages API). Each Propose() builds one prompt from the target, GPU,
// parent feedback, best candidate and failed siblings, makes request.n calls in parallel
// (bounded by the shared concurrency limit), parses each answer into a candidate or a
// rejection, stores every call's transcript, and counts tokens and cost per job.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/store.h"
#include "kforge/v1/proposer.pb.h"
#include "services/proposer/llm/llm_client.h"
#include "services/proposer/llm/llm_options.h"
#include "services/proposer/llm/prompt_builder.h"
#include "services/proposer/proposer.h"

namespace kforge {

class LlmProposer : public Proposer {
 public:
  // `transcripts` (not owned, may be null) receives every call's transcript as a blob;
  // without a store the transcripts stay in memory (the most recent kMaxTranscriptsInMemory).
  static absl::StatusOr<std::unique_ptr<LlmProposer>> Create(const LlmOptions& options,
                                                             Store* transcripts,
                                                             PromptOptions prompt_options = {});

  static constexpr size_t kMaxTranscriptsInMemory = 4096;

  // Candidates best first by the order the calls were made (an LLM gives no prior). Fails
  // only when every call failed (unreachable server, rejected key, retries exhausted); a
  // call that failed beside successful ones becomes a CALL_FAILED rejection.
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override;
  // "openai" or "anthropic".
  std::string Name() const override;

  // Tokens, cost and completed calls so far for `job_id` (ProposeRequest.job_id).
  v1::LlmUsage UsageForJob(std::string_view job_id) const;
  // A transcript by the digest in Candidate.transcript: from memory, else from the store.
  absl::StatusOr<std::string> Transcript(const v1::Digest& digest) const;
  const LlmOptions& options() const { return client_->options(); }

 private:
  struct CallOutcome {
    std::optional<v1::Candidate> candidate;
    std::optional<v1::Rejection> rejection;
    absl::Status error;
    bool answered = false;  // the server returned an answer (it is billed)
    int64_t input_tokens = 0;
    int64_t output_tokens = 0;
    double cost_usd = 0;
  };

  LlmProposer(std::unique_ptr<LlmClient> client, Store* store, PromptOptions prompt_options);

  CallOutcome RunCall(const v1::ProposeRequest& request, ChatRequest prompt, int call_index);
  v1::Digest KeepTranscript(std::string text);

  std::unique_ptr<LlmClient> client_;
  Store* store_;
  PromptOptions prompt_options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, v1::LlmUsage> usage_by_job_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> transcripts_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> transcript_order_ ABSL_GUARDED_BY(mu_);
};

// The factory the ProposalService uses for the names "openai" and "anthropic" (the backend
// comes from options.backend).
absl::StatusOr<std::unique_ptr<Proposer>> MakeLlmProposer(const LlmOptions& options,
                                                          Store* transcripts);

}  // namespace kforge
