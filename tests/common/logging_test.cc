// InitLogging level parsing and RedactSecret.
#include "common/logging.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(LoggingTest, Levels) {
  for (const char* level : {"debug", "info", "warn", "error"}) {
    EXPECT_TRUE(InitLogging(level).ok()) << level;
  }
  absl::Status bad = InitLogging("loud");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("loud"), absl::string_view::npos);
}

TEST(LoggingTest, RedactSecretShowsAtMostTheLastFour) {
  std::string key = "sk-proj-abcdefghijklmnop1234";
  std::string redacted = RedactSecret(key);
  EXPECT_EQ(redacted.substr(redacted.size() - 4), "1234");
  EXPECT_EQ(redacted.find("sk-proj"), std::string::npos);
  EXPECT_EQ(redacted.find("mnop"), std::string::npos);
  // Short secrets reveal nothing at all.
  for (std::string secret : {"", "abc", "abcdefgh", "abcdefghijkl"}) {
    std::string short_redacted = RedactSecret(secret);
    for (char c : secret) EXPECT_EQ(short_redacted.find(c), std::string::npos) << secret;
  }
}

}  // namespace
}  // namespace kforge
