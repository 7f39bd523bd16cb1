// Logging setup (spdlog to stderr) and redaction of secrets that could end up in logs.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kforge {

// Sends the default spdlog logger to stderr at `level`: "debug", "info", "warn" or "error".
absl::Status InitLogging(std::string_view level);

// For API keys and tokens: "****" plus the last 4 characters for long secrets, "****" alone
// for short ones (12 characters or fewer) so nothing of them leaks.
std::string RedactSecret(std::string_view secret);

}  // namespace kforge
