// LlmOptions defaults, validation, config overrides and key loading.
#include "services/proposer/llm/llm_options.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace kforge {
namespace {

bool IsKnownBackend(const std::string& backend) {
  return backend == "openai" || backend == "anthropic";
}

// Applies config key `key` through `get` when it is set; a value that does not parse is an
// error (the config names the key, the value and where it came from).
template <typename T, typename Getter>
absl::Status Override(const Config& config, std::string_view key, Getter get, T& field) {
  if (!config.Has(key)) return absl::OkStatus();
  KF_ASSIGN_OR_RETURN(auto value, (config.*get)(key));
  field = static_cast<T>(value);
  return absl::OkStatus();
}

}  // namespace

std::string DefaultBaseUrl(const std::string& backend) {
  return backend == "anthropic" ? "https://api.anthropic.com" : "https://api.openai.com/v1";
}

std::string DefaultModel(const std::string& backend) {
  return backend == "anthropic" ? "claude-sonnet-4-5" : "gpt-4.1";
}

std::string DefaultApiKeyEnv(const std::string& backend) {
  return backend == "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

absl::StatusOr<LlmOptions> ResolveLlmOptions(LlmOptions options) {
  if (!IsKnownBackend(options.backend)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown LLM backend '", options.backend,
                     "': use 'openai' (any OpenAI-compatible server) or 'anthropic'"));
  }
  if (options.base_url.empty()) options.base_url = DefaultBaseUrl(options.backend);
  while (absl::EndsWith(options.base_url, "/")) options.base_url.pop_back();
  if (!absl::StartsWith(options.base_url, "http://") &&
      !absl::StartsWith(options.base_url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("LLM base URL '", options.base_url,
                     "' must start with http:// or https:// (set llm_base_url)"));
  }
  if (options.model.empty()) options.model = DefaultModel(options.backend);
  if (options.api_key_env.empty()) options.api_key_env = DefaultApiKeyEnv(options.backend);
  if (options.temperature < 0.0 || options.temperature > 2.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm_temperature ", options.temperature, " is out of range: use 0 to 2"));
  }
  if (options.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm_max_tokens ", options.max_tokens, " must be at least 1"));
  }
  if (options.max_retries < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm_max_retries ", options.max_retries, " must be 0 or more"));
  }
  if (options.concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm_concurrency ", options.concurrency, " must be at least 1"));
  }
  if (options.price_input_per_mtok < 0 || options.price_output_per_mtok < 0) {
    return absl::InvalidArgumentError("LLM token prices must not be negative");
  }
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.read_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("LLM connect/read/write timeouts must be positive");
  }
  if (options.backoff_base < absl::ZeroDuration() || options.backoff_max < options.backoff_base) {
    return absl::InvalidArgumentError(
        "llm_backoff_base must be >= 0 and llm_backoff_max >= llm_backoff_base");
  }
  return options;
}

absl::Status ApplyLlmConfig(const Config& config, LlmOptions& options) {
  KF_RETURN_IF_ERROR(Override(config, "llm_backend", &Config::GetString, options.backend));
  KF_RETURN_IF_ERROR(Override(config, "llm_base_url", &Config::GetString, options.base_url));
  KF_RETURN_IF_ERROR(Override(config, "llm_model", &Config::GetString, options.model));
  KF_RETURN_IF_ERROR(Override(config, "llm_api_key_env", &Config::GetString, options.api_key_env));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_api_key_file", &Config::GetString, options.api_key_file));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_anthropic_version", &Config::GetString, options.anthropic_version));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_max_tokens_field", &Config::GetString, options.max_tokens_field));
  KF_RETURN_IF_ERROR(Override(config, "llm_temperature", &Config::GetDouble, options.temperature));
  KF_RETURN_IF_ERROR(Override(config, "llm_max_tokens", &Config::GetInt, options.max_tokens));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_connect_timeout", &Config::GetDuration, options.connect_timeout));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_read_timeout", &Config::GetDuration, options.read_timeout));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_write_timeout", &Config::GetDuration, options.write_timeout));
  KF_RETURN_IF_ERROR(Override(config, "llm_max_retries", &Config::GetInt, options.max_retries));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_backoff_base", &Config::GetDuration, options.backoff_base));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_backoff_max", &Config::GetDuration, options.backoff_max));
  KF_RETURN_IF_ERROR(
      Override(config, "llm_max_retry_after", &Config::GetDuration, options.max_retry_after));
  KF_RETURN_IF_ERROR(Override(config, "llm_jitter_seed", &Config::GetInt, options.jitter_seed));
  KF_RETURN_IF_ERROR(Override(config, "llm_concurrency", &Config::GetInt, options.concurrency));
  KF_RETURN_IF_ERROR(Override(config, "llm_price_input_per_mtok", &Config::GetDouble,
                              options.price_input_per_mtok));
  KF_RETURN_IF_ERROR(Override(config, "llm_price_output_per_mtok", &Config::GetDouble,
                              options.price_output_per_mtok));
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadApiKey(const LlmOptions& options) {
  if (!options.api_key_file.empty()) {
    std::ifstream in(options.api_key_file);
    if (!in) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read the LLM API key file '", options.api_key_file,
                       "': check the path and its permissions (llm_api_key_file)"));
    }
    std::stringstream text;
    text << in.rdbuf();
    std::string key(absl::StripAsciiWhitespace(text.str()));
    if (key.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the LLM API key file '", options.api_key_file, "' is empty: put the key in it"));
    }
    return key;
  }
  const std::string env =
      options.api_key_env.empty() ? DefaultApiKeyEnv(options.backend) : options.api_key_env;
  const char* value = std::getenv(env.c_str());
  if (value == nullptr) return std::string();
  return std::string(absl::StripAsciiWhitespace(value));
}

double LlmCostUsd(const LlmOptions& options, int64_t input_tokens, int64_t output_tokens) {
  return (static_cast<double>(input_tokens) * options.price_input_per_mtok +
          static_cast<double>(output_tokens) * options.price_output_per_mtok) /
         1e6;
}

}  // namespace kforge
