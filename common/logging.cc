// spdlog setup and secret redaction.
#include "common/logging.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace kforge {

absl::Status InitLogging(std::string_view level) {
  std::string name = absl::AsciiStrToLower(std::string(level));
  spdlog::level::level_enum parsed;
  if (name == "debug") {
    parsed = spdlog::level::debug;
  } else if (name == "info") {
    parsed = spdlog::level::info;
  } else if (name == "warn" || name == "warning") {
    parsed = spdlog::level::warn;
  } else if (name == "error") {
    parsed = spdlog::level::err;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level '", std::string(level), "': use debug, info, warn or error"));
  }
  // A fresh logger object each call, so InitLogging may run more than once (tests, CLI).
  auto logger = std::make_shared<spdlog::logger>(
      "kforge", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%t] %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

std::string RedactSecret(std::string_view secret) {
  constexpr size_t kShownSuffix = 4;
  constexpr size_t kMinLengthToShowSuffix = 13;
  if (secret.size() < kMinLengthToShowSuffix) return "****";
  return "****" + std::string(secret.substr(secret.size() - kShownSuffix));
}

}  // namespace kforge
