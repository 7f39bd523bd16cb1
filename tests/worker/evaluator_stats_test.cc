// Timing statistics: median, bootstrap interval of the median, coefficient of variation.
#include "services/worker/evaluator_stats.h"

#include <random>

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Median({7}), 7);
}

TEST(CoefficientOfVariationTest, ConstantIsZeroAndKnownValue) {
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({5, 5, 5}), 0);
  // mean 2, population std 1 -> 0.5
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({1, 3}), 0.5);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({1}), 0);
}

TEST(BootstrapTest, IntervalHoldsMedianAndIsDeterministic) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(10e-6, 0.5e-6);
  std::vector<double> samples;
  for (int i = 0; i < 200; ++i) samples.push_back(noise(rng));
  ConfidenceInterval a = BootstrapMedianInterval(samples, 2000, 0.95, 42);
  ConfidenceInterval b = BootstrapMedianInterval(samples, 2000, 0.95, 42);
  double m = Median(samples);
  EXPECT_LE(a.low, m);
  EXPECT_GE(a.high, m);
  EXPECT_LT(a.low, a.high);
  EXPECT_DOUBLE_EQ(a.low, b.low);
  EXPECT_DOUBLE_EQ(a.high, b.high);
  // The true median (10 us) lies inside a 95% interval of 200 samples.
  EXPECT_LT(a.low, 10e-6 + 0.2e-6);
  EXPECT_GT(a.high, 10e-6 - 0.2e-6);
}

TEST(BootstrapTest, NarrowsWithMoreSamples) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(1.0, 0.1);
  std::vector<double> few, many;
  for (int i = 0; i < 20; ++i) few.push_back(noise(rng));
  for (int i = 0; i < 2000; ++i) many.push_back(noise(rng));
  ConfidenceInterval f = BootstrapMedianInterval(few, 2000, 0.95, 1);
  ConfidenceInterval m = BootstrapMedianInterval(many, 2000, 0.95, 1);
  EXPECT_LT(m.high - m.low, f.high - f.low);
}

TEST(BootstrapTest, WiderConfidenceGivesWiderInterval) {
  std::vector<double> samples;
  for (int i = 0; i < 100; ++i) samples.push_back(i % 17);
  ConfidenceInterval c80 = BootstrapMedianInterval(samples, 2000, 0.80, 3);
  ConfidenceInterval c99 = BootstrapMedianInterval(samples, 2000, 0.99, 3);
  EXPECT_LE(c99.low, c80.low);
  EXPECT_GE(c99.high, c80.high);
}

TEST(SummarizeTimesTest, FillsTiming) {
  v1::Timing t = SummarizeTimes({1e-3, 2e-3, 3e-3, 4e-3, 5e-3}, "events");
  EXPECT_DOUBLE_EQ(t.median_s(), 3e-3);
  EXPECT_EQ(t.reps(), 5);
  EXPECT_EQ(t.mode(), "events");
  EXPECT_LE(t.ci_low_s(), 3e-3);
  EXPECT_GE(t.ci_high_s(), 3e-3);
  EXPECT_GT(t.cv(), 0);
}

}  // namespace
}  // namespace kforge
