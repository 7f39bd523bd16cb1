// Retry policy of the LLM clients: retryable statuses, jittered backoff, Retry-After.
#include "services/proposer/llm/retry_policy.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "services/proposer/llm/string_view_compat.h"

namespace kforge {

bool IsRetryableHttpStatus(int status) {
  return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

Backoff::Backoff(absl::Duration base, absl::Duration max, uint64_t seed)
    : base_(base), max_(max), rng_(seed) {}

absl::Duration Backoff::Next() {
  // Doubling past 2^30 overflows nothing useful: the cap has long taken over by then.
  const int exponent = std::min(retries_, 30);
  ++retries_;
  const absl::Duration full = std::min(max_, base_ * static_cast<double>(1LL << exponent));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return full / 2 + (full / 2) * unit(rng_);
}

std::optional<absl::Duration> ParseRetryAfter(std::string_view value, absl::Time now) {
  const std::string text(absl::StripAsciiWhitespace(Av(value)));
  if (text.empty()) return std::nullopt;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) {
    if (seconds < 0) return std::nullopt;
    return absl::Seconds(seconds);
  }
  // IMF-fixdate first (what servers send today), then the two obsolete forms RFC 9110 keeps.
  static constexpr const char* kFormats[] = {
      "%a, %d %b %Y %H:%M:%S GMT",
      "%A, %d-%b-%y %H:%M:%S GMT",
      "%a %b %e %H:%M:%S %Y",
  };
  for (const char* format : kFormats) {
    absl::Time when;
    std::string error;
    if (absl::ParseTime(format, text, absl::UTCTimeZone(), &when, &error)) {
      return std::max(absl::ZeroDuration(), when - now);
    }
  }
  return std::nullopt;
}

}  // namespace kforge
