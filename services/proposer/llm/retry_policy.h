// Retry policy of the LLM clients: which answers are worth retrying, exponential backoff with
// seeded jitter, and the server's Retry-After header (delta-seconds or HTTP-date).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

#include "absl/time/time.h"

namespace kforge {

// 408, 409, 429 and every 5xx (Anthropic's 529 "overloaded" included). Never 400/401/403:
// those do not get better by asking again.
bool IsRetryableHttpStatus(int status);

// Delays of successive retries: min(max, base * 2^k), then "equal jitter" (half fixed, half
// uniform) so clients that failed together do not retry together. Same seed, same delays.
class Backoff {
 public:
  Backoff(absl::Duration base, absl::Duration max, uint64_t seed);
  absl::Duration Next();
  int retries() const { return retries_; }

 private:
  absl::Duration base_;
  absl::Duration max_;
  std::mt19937_64 rng_;
  int retries_ = 0;
};

// The wait a Retry-After header asks for, measured from `now`: "120" or
// "Wed, 21 Oct 2015 07:28:00 GMT" (also the obsolete RFC 850 and asctime forms). A date in
// the past is a zero wait. nullopt when the value is neither.
std::optional<absl::Duration> ParseRetryAfter(std::string_view value, absl::Time now);

}  // namespace kforge
