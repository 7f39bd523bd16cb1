// LlmProposer: prompts, parallel calls, parsing, transcripts and usage accounting.
#include "services/proposer/llm/llm_proposer.h"

#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/status.h"
#include "services/proposer/llm/llm_transcript.h"
#include "services/proposer/llm/response_parser.h"
#include "spdlog/spdlog.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<LlmProposer>> LlmProposer::Create(const LlmOptions& options,
                                                                 Store* transcripts,
                                                                 PromptOptions prompt_options) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<LlmClient> client, LlmClient::Create(options));
  return std::unique_ptr<LlmProposer>(
      new LlmProposer(std::move(client), transcripts, prompt_options));
}

LlmProposer::LlmProposer(std::unique_ptr<LlmClient> client, Store* store,
                         PromptOptions prompt_options)
    : client_(std::move(client)), store_(store), prompt_options_(prompt_options) {}

std::string LlmProposer::Name() const { return client_->options().backend; }

absl::StatusOr<v1::ProposeResponse> LlmProposer::Propose(const v1::ProposeRequest& request) {
  if (request.target().nodes_size() == 0) {
    return absl::InvalidArgumentError(
        "ProposeRequest.target has no nodes: capture the model first and pass one of its "
        "targets");
  }
  const int n = std::max(1, request.n());
  const ChatRequest prompt = BuildProposalPrompt(request, prompt_options_);

  // One thread per call; the client's semaphore bounds how many are in flight.
  std::vector<CallOutcome> outcomes(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    ChatRequest call_prompt = prompt;
    call_prompt.seed = request.seed() + static_cast<uint64_t>(i);
    threads.emplace_back([this, &request, &outcomes, i, call_prompt = std::move(call_prompt)] {
      outcomes[i] = RunCall(request, call_prompt, i);
    });
  }
  for (std::thread& thread : threads) thread.join();

  v1::ProposeResponse response;
  absl::flat_hash_set<std::string> seen;
  absl::Status first_error;
  int failed = 0;
  v1::LlmUsage& usage = *response.mutable_usage();
  for (CallOutcome& outcome : outcomes) {
    if (outcome.answered) {
      usage.set_calls(usage.calls() + 1);
      usage.set_input_tokens(usage.input_tokens() + outcome.input_tokens);
      usage.set_output_tokens(usage.output_tokens() + outcome.output_tokens);
      usage.set_cost_usd(usage.cost_usd() + outcome.cost_usd);
    }
    if (!outcome.error.ok()) {
      ++failed;
      if (first_error.ok()) first_error = outcome.error;
      v1::Rejection* rejection = response.add_rejections();
      rejection->set_reason(kRejectCallFailed);
      rejection->set_message(std::string(outcome.error.message()));
      continue;
    }
    if (outcome.rejection.has_value()) *response.add_rejections() = *outcome.rejection;
    if (outcome.candidate.has_value() && seen.insert(outcome.candidate->id()).second) {
      *response.add_candidates() = *std::move(outcome.candidate);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    v1::LlmUsage& job = usage_by_job_[request.job_id()];
    job.set_calls(job.calls() + usage.calls());
    job.set_input_tokens(job.input_tokens() + usage.input_tokens());
    job.set_output_tokens(job.output_tokens() + usage.output_tokens());
    job.set_cost_usd(job.cost_usd() + usage.cost_usd());
  }
  if (failed == n) return first_error;
  return response;
}

LlmProposer::CallOutcome LlmProposer::RunCall(const v1::ProposeRequest& request, ChatRequest prompt,
                                              int call_index) {
  const LlmOptions& options = client_->options();
  CallOutcome outcome;
  LlmTranscript transcript;
  transcript.backend = options.backend;
  transcript.model = options.model;
  transcript.job_id = request.job_id();
  transcript.target_id = request.target().id();
  transcript.parent_id = request.parent().candidate().id();
  transcript.call_index = call_index;
  transcript.temperature = options.temperature;
  transcript.max_tokens = options.max_tokens;
  transcript.prompt = std::move(prompt);

  absl::StatusOr<ChatReply> reply = client_->Complete(transcript.prompt, &transcript.call);
  if (!reply.ok()) {
    outcome.error = reply.status();
    transcript.outcome = "failed";
    transcript.error = std::string(reply.status().message());
    KeepTranscript(TranscriptJson(transcript));
    spdlog::warn("LLM call {} for job '{}' failed: {}", call_index, request.job_id(),
                 std::string(reply.status().message()));
    return outcome;
  }

  transcript.reply = *reply;
  outcome.answered = true;
  outcome.input_tokens = reply->input_tokens;
  outcome.output_tokens = reply->output_tokens;
  outcome.cost_usd = LlmCostUsd(options, reply->input_tokens, reply->output_tokens);
  transcript.cost_usd = outcome.cost_usd;

  ParseResult parsed = ParseLlmAnswer(reply->text);
  if (!parsed.ok()) {
    v1::Rejection rejection = std::move(parsed.rejection);
    if (!reply->refusal.empty()) {
      rejection.set_reason(kRejectRefused);
      rejection.set_message(absl::StrCat("The model declined: ", reply->refusal));
    } else if (reply->truncated) {
      rejection.set_message(absl::StrCat(rejection.message(),
                                         " (The answer stopped at the token limit of ",
                                         options.max_tokens, ": keep the explanation short.)"));
    }
    transcript.outcome = "rejected";
    transcript.rejection = rejection;
    KeepTranscript(TranscriptJson(transcript));
    outcome.rejection = std::move(rejection);
    return outcome;
  }

  v1::Candidate candidate;
  candidate.set_id(CandidateId(parsed.answer->source, parsed.answer->launch_plan_json));
  candidate.set_source(std::move(parsed.answer->source));
  candidate.set_launch_plan_json(std::move(parsed.answer->launch_plan_json));
  candidate.set_parent_id(request.parent().candidate().id());
  candidate.set_proposer(absl::StrCat(options.backend, ":", options.model));
  (*candidate.mutable_params())["model"] = options.model;
  (*candidate.mutable_params())["temperature"] = absl::StrCat(options.temperature);
  (*candidate.mutable_params())["seed"] = absl::StrCat(transcript.prompt.seed);
  transcript.outcome = "candidate";
  transcript.candidate_id = candidate.id();
  *candidate.mutable_transcript() = KeepTranscript(TranscriptJson(transcript));
  outcome.candidate = std::move(candidate);
  return outcome;
}

v1::Digest LlmProposer::KeepTranscript(std::string text) {
  // The key never appears in what we build, but a server may echo it back in a body.
  text = client_->ScrubKey(text);
  if (store_ != nullptr) {
    absl::StatusOr<v1::Digest> digest = PutBlob(*store_, text);
    if (digest.ok()) return *digest;
    spdlog::warn("could not store an LLM transcript in {} ({}); keeping it in memory",
                 store_->Describe(), std::string(digest.status().message()));
  }
  v1::Digest digest = MakeDigest(text);
  absl::MutexLock lock(&mu_);
  if (transcripts_.emplace(digest.sha256(), std::move(text)).second) {
    transcript_order_.push_back(digest.sha256());
    if (transcript_order_.size() > kMaxTranscriptsInMemory) {
      transcripts_.erase(transcript_order_.front());
      transcript_order_.pop_front();
    }
  }
  return digest;
}

v1::LlmUsage LlmProposer::UsageForJob(std::string_view job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = usage_by_job_.find(std::string(job_id));
  return it == usage_by_job_.end() ? v1::LlmUsage() : it->second;
}

absl::StatusOr<std::string> LlmProposer::Transcript(const v1::Digest& digest) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = transcripts_.find(digest.sha256());
    if (it != transcripts_.end()) return it->second;
  }
  if (store_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("no LLM transcript ", digest.sha256(),
                                            " in memory (older ones are dropped without a "
                                            "store; run with a store to keep them all)"));
  }
  return GetBlob(*store_, digest);
}

absl::StatusOr<std::unique_ptr<Proposer>> MakeLlmProposer(const LlmOptions& options,
                                                          Store* transcripts) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<LlmProposer> proposer,
                      LlmProposer::Create(options, transcripts));
  return std::unique_ptr<Proposer>(std::move(proposer));
}

}  // namespace kforge
