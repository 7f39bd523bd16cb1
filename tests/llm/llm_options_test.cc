// LlmOptions: defaults, validation, config overrides, key loading, cost.
#include "services/proposer/llm/llm_options.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

TEST(LlmOptionsTest, FillsBackendDefaults) {
  LlmOptions openai;
  absl::StatusOr<LlmOptions> resolved = ResolveLlmOptions(openai);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->base_url, "https://api.openai.com/v1");
  EXPECT_EQ(resolved->api_key_env, "OPENAI_API_KEY");
  EXPECT_FALSE(resolved->model.empty());
  LlmOptions anthropic;
  anthropic.backend = "anthropic";
  resolved = ResolveLlmOptions(anthropic);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->base_url, "https://api.anthropic.com");
  EXPECT_EQ(resolved->api_key_env, "ANTHROPIC_API_KEY");
}

TEST(LlmOptionsTest, RefusesBadValuesNamingThem) {
  LlmOptions options;
  options.backend = "gemini";
  absl::StatusOr<LlmOptions> resolved = ResolveLlmOptions(options);
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("gemini"), std::string::npos);
  options = LlmOptions();
  options.base_url = "ftp://example.com";
  EXPECT_FALSE(ResolveLlmOptions(options).ok());
  options = LlmOptions();
  options.concurrency = 0;
  resolved = ResolveLlmOptions(options);
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("llm_concurrency"), std::string::npos);
}

TEST(LlmOptionsTest, ConfigOverridesDefaults) {
  Config config;
  config.Set("llm_backend", "anthropic");
  config.Set("llm_model", "claude-test");
  config.Set("llm_max_tokens", "1234");
  config.Set("llm_read_timeout", "90s");
  config.Set("llm_concurrency", "3");
  config.Set("llm_price_input_per_mtok", "3.0");
  config.Set("llm_price_output_per_mtok", "15");
  LlmOptions options;
  ASSERT_TRUE(ApplyLlmConfig(config, options).ok());
  EXPECT_EQ(options.backend, "anthropic");
  EXPECT_EQ(options.model, "claude-test");
  EXPECT_EQ(options.max_tokens, 1234);
  EXPECT_EQ(options.read_timeout, absl::Seconds(90));
  EXPECT_EQ(options.concurrency, 3);
  EXPECT_DOUBLE_EQ(LlmCostUsd(options, 1'000'000, 2'000'000), 3.0 + 30.0);
  config.Set("llm_max_tokens", "many");
  absl::Status bad = ApplyLlmConfig(config, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("llm_max_tokens"), std::string::npos);
}

TEST(LlmOptionsTest, KeyComesFromFileBeforeEnvironment) {
  TempDir dir;
  const std::string key_file = (dir / "key").string();
  std::ofstream(key_file) << "  sk-from-file\n";
  ASSERT_EQ(setenv("KFORGE_TEST_OPTIONS_KEY", "sk-from-env", 1), 0);
  LlmOptions options;
  options.api_key_env = "KFORGE_TEST_OPTIONS_KEY";
  EXPECT_EQ(*LoadApiKey(options), "sk-from-env");
  options.api_key_file = key_file;
  EXPECT_EQ(*LoadApiKey(options), "sk-from-file");
  options.api_key_file = (dir / "missing").string();
  absl::StatusOr<std::string> missing = LoadApiKey(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  options.api_key_file.clear();
  unsetenv("KFORGE_TEST_OPTIONS_KEY");
  EXPECT_EQ(*LoadApiKey(options), "");
}

}  // namespace
}  // namespace kforge
