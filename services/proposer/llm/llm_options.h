// LlmOptions: how an LLM proposer reaches its model (backend, endpoint, key source), how it
// samples, how patiently it retries, how many calls it keeps in flight and what tokens cost.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config.h"

namespace kforge {

struct LlmOptions {
  // "openai" (any OpenAI-compatible chat-completions server: OpenAI, vLLM, SGLang, llama.cpp,
  // Ollama) or "anthropic" (the Messages API).
  std::string backend = "openai";
  // Empty: the backend's public endpoint (https://api.openai.com/v1, https://api.anthropic.com).
  // OpenAI-compatible URLs include the version prefix (http://localhost:8000/v1); requests go
  // to {base_url}/chat/completions, Anthropic ones to {base_url}/v1/messages.
  std::string base_url;
  // Empty: the backend's default model (DefaultModel).
  std::string model;
  // Where the key comes from: a file wins over the environment variable. Empty api_key_env:
  // OPENAI_API_KEY or ANTHROPIC_API_KEY by backend. Local servers often need no key.
  std::string api_key_env;
  std::string api_key_file;
  std::string anthropic_version = "2023-06-01";
  // Reasoning models on api.openai.com want "max_completion_tokens" instead of "max_tokens".
  std::string max_tokens_field = "max_tokens";

  double temperature = 0.7;
  int max_tokens = 8192;

  absl::Duration connect_timeout = absl::Seconds(10);
  // Per read on the socket, so it must cover the model's time to first byte.
  absl::Duration read_timeout = absl::Seconds(300);
  absl::Duration write_timeout = absl::Seconds(30);

  // Retries after the first attempt, on 429, 5xx and transport errors.
  int max_retries = 4;
  absl::Duration backoff_base = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(60);
  // A server's Retry-After is honoured up to this long.
  absl::Duration max_retry_after = absl::Seconds(120);
  // Seeds the backoff jitter (mixed with each request's seed), so a run is reproducible.
  uint64_t jitter_seed = 0x6b666f726765ULL;

  // Calls in flight at once across everything the proposer does.
  int concurrency = 4;

  // USD per million tokens; 0 when unknown (cost is then reported as 0).
  double price_input_per_mtok = 0.0;
  double price_output_per_mtok = 0.0;

  // Waits between retries. Null: absl::SleepFor. Tests pass a recorder that also sleeps.
  std::function<void(absl::Duration)> sleep_for;
};

// The backend's public endpoint and default model.
std::string DefaultBaseUrl(const std::string& backend);
std::string DefaultModel(const std::string& backend);
// OPENAI_API_KEY or ANTHROPIC_API_KEY.
std::string DefaultApiKeyEnv(const std::string& backend);

// `options` with backend defaults filled in; InvalidArgument for an unknown backend, a bad
// URL or out-of-range numbers, naming the option and what to set.
absl::StatusOr<LlmOptions> ResolveLlmOptions(LlmOptions options);

// Overrides `options` with the config keys that are set: llm_backend, llm_base_url,
// llm_model, llm_api_key_env, llm_api_key_file, llm_anthropic_version, llm_max_tokens_field,
// llm_temperature, llm_max_tokens, llm_connect_timeout, llm_read_timeout, llm_write_timeout,
// llm_max_retries, llm_backoff_base, llm_backoff_max, llm_max_retry_after, llm_jitter_seed,
// llm_concurrency, llm_price_input_per_mtok, llm_price_output_per_mtok
// (environment: KFORGE_LLM_MODEL, ...; durations as "30s", "250ms").
absl::Status ApplyLlmConfig(const Config& config, LlmOptions& options);

// The API key from api_key_file, else the environment variable; empty when neither is set
// (fine for local servers). An unreadable or empty key file is an error naming the file.
absl::StatusOr<std::string> LoadApiKey(const LlmOptions& options);

// cost = tokens * price / 1e6.
double LlmCostUsd(const LlmOptions& options, int64_t input_tokens, int64_t output_tokens);

}  // namespace kforge
