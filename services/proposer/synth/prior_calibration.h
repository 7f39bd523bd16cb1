// PriorCalibration: what the measured candidates of a target say about the cost-model prior's
// errors there. A prior's errors on a given target are largely systematic per parameter value:
// a split mode, a block shape or an unroll that the model overrates is overrated in every
// config that uses it (docs/benchmarks/2026-12-01-replay-search-and-prior.md). So the
// log of measured / prior over the configs evaluated so far is fitted as a sum of per-value
// effects (ridge regression, one indicator per parameter=value), and the prior of an untried
// config is multiplied by exp(its predicted effect). Values no measurement has touched keep an
// effect of 0: with nothing measured, the prior stands as it is.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "services/proposer/synth/param_space.h"

namespace kforge::synth {

class PriorCalibration {
 public:
  // One measured config: its prior and its measured time (seconds, both > 0).
  void Add(const Config& config, double prior_s, double measured_s);
  // Fits the effects; `ridge` pulls each towards 0 (in log units; larger: trust the prior
  // more). A fit over fewer than `min_points` measurements predicts 0 everywhere.
  void Fit(double ridge = 1.0, int min_points = 4);

  // The fitted log correction of `config` (0 before Fit or with too few measurements): the
  // prior times exp(Correction) is the calibrated estimate. The common offset is left out:
  // it shifts every config alike and so does not change a ranking.
  double Correction(const Config& config) const;
  int points() const { return static_cast<int>(points_.size()); }

 private:
  std::vector<std::pair<std::vector<int>, double>> points_;  // feature indices, log ratio
  std::map<std::string, int> feature_index_;                 // "name=value" -> index
  std::vector<double> weights_;                              // per feature, after Fit
  std::vector<int> AddFeatures(const Config& config);  // indexing values not seen before
  std::vector<int> KnownFeatures(const Config& config) const;
};

}  // namespace kforge::synth
