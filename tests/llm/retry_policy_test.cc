// Retry policy: retryable statuses, jittered backoff, Retry-After.
#include "services/proposer/llm/retry_policy.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(RetryPolicyTest, RetriesRateLimitsAndServerErrorsOnly) {
  for (int status : {408, 409, 429, 500, 502, 503, 504, 529}) {
    EXPECT_TRUE(IsRetryableHttpStatus(status)) << status;
  }
  for (int status : {200, 400, 401, 403, 404, 413, 422}) {
    EXPECT_FALSE(IsRetryableHttpStatus(status)) << status;
  }
}

TEST(RetryPolicyTest, BackoffDoublesWithinJitterAndCaps) {
  Backoff backoff(absl::Seconds(1), absl::Seconds(8), /*seed=*/7);
  const double expected_full[] = {1, 2, 4, 8, 8, 8};
  for (double full : expected_full) {
    const double delay = absl::ToDoubleSeconds(backoff.Next());
    EXPECT_GE(delay, full / 2);
    EXPECT_LE(delay, full);
  }
  EXPECT_EQ(backoff.retries(), 6);
}

TEST(RetryPolicyTest, BackoffIsReproducibleFromItsSeed) {
  Backoff a(absl::Milliseconds(100), absl::Seconds(10), 1234);
  Backoff b(absl::Milliseconds(100), absl::Seconds(10), 1234);
  Backoff c(absl::Milliseconds(100), absl::Seconds(10), 4321);
  bool differs = false;
  for (int i = 0; i < 5; ++i) {
    const absl::Duration next = a.Next();
    EXPECT_EQ(next, b.Next());
    differs = differs || next != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(RetryPolicyTest, RetryAfterInSeconds) {
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  EXPECT_EQ(ParseRetryAfter("7", now), absl::Seconds(7));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfter("-3", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
}

TEST(RetryPolicyTest, RetryAfterAsHttpDate) {
  // Wed, 21 Oct 2015 07:28:00 GMT is 1445412480.
  const absl::Time now = absl::FromUnixSeconds(1445412480 - 30);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now), absl::Seconds(30));
  EXPECT_EQ(ParseRetryAfter("Wednesday, 21-Oct-15 07:28:00 GMT", now), absl::Seconds(30));
  EXPECT_EQ(ParseRetryAfter("Wed Oct 21 07:28:00 2015", now), absl::Seconds(30));
  // A date in the past means "now".
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), absl::ZeroDuration());
}

}  // namespace
}  // namespace kforge
