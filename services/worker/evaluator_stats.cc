// Timing statistics: median, bootstrap interval of the median, coefficient of variation.
#include "services/worker/evaluator_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kforge {

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + mid, samples.end());
  double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  double lower = *std::max_element(samples.begin(), samples.begin() + mid);
  return (lower + upper) / 2;
}

double CoefficientOfVariation(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  double mean = 0;
  for (double s : samples) mean += s;
  mean /= static_cast<double>(samples.size());
  if (mean == 0) return 0;
  double var = 0;
  for (double s : samples) var += (s - mean) * (s - mean);
  var /= static_cast<double>(samples.size());
  return std::sqrt(var) / std::fabs(mean);
}

ConfidenceInterval BootstrapMedianInterval(const std::vector<double>& samples, int resamples,
                                           double confidence, uint64_t seed) {
  if (samples.empty()) return {};
  if (samples.size() == 1 || resamples <= 0) {
    double m = Median(samples);
    return {m, m};
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
  std::vector<double> medians(static_cast<size_t>(resamples));
  std::vector<double> draw(samples.size());
  for (double& m : medians) {
    for (double& d : draw) d = samples[pick(rng)];
    m = Median(draw);
  }
  std::sort(medians.begin(), medians.end());
  double tail = (1 - confidence) / 2;
  auto at = [&](double q) {
    double pos = q * static_cast<double>(medians.size() - 1);
    size_t i = static_cast<size_t>(std::floor(pos));
    size_t j = std::min(i + 1, medians.size() - 1);
    double frac = pos - static_cast<double>(i);
    return medians[i] * (1 - frac) + medians[j] * frac;
  };
  return {at(tail), at(1 - tail)};
}

v1::Timing SummarizeTimes(const std::vector<double>& seconds, const std::string& mode) {
  v1::Timing timing;
  timing.set_median_s(Median(seconds));
  ConfidenceInterval ci = BootstrapMedianInterval(seconds, 2000, 0.95, /*seed=*/0x6b666f72);
  timing.set_ci_low_s(ci.low);
  timing.set_ci_high_s(ci.high);
  timing.set_cv(CoefficientOfVariation(seconds));
  timing.set_reps(static_cast<int32_t>(seconds.size()));
  timing.set_mode(mode);
  return timing;
}

}  // namespace kforge
