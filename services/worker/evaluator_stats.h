// Timing statistics of the evaluator: median, a bootstrap confidence interval of the median
// and the coefficient of variation, summarized into a v1::Timing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"

namespace kforge {

struct ConfidenceInterval {
  double low = 0;
  double high = 0;
};

// Median of `samples` (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> samples);

// Standard deviation / mean (population); 0 for fewer than two samples or a zero mean.
double CoefficientOfVariation(const std::vector<double>& samples);

// Percentile bootstrap interval of the median: `resamples` resamples with replacement drawn
// from a generator seeded with `seed` (deterministic), `confidence` e.g. 0.95.
ConfidenceInterval BootstrapMedianInterval(const std::vector<double>& samples, int resamples,
                                           double confidence, uint64_t seed);

// Median, 95% bootstrap interval (2000 resamples), CV and the rep count of `seconds`.
v1::Timing SummarizeTimes(const std::vector<double>& seconds, const std::string& mode);

}  // namespace kforge
