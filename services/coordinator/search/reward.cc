// Scale-free reward of an evaluated candidate (see reward.h for the choice of shape).
#include "services/coordinator/search/reward.h"

#include <cmath>

namespace kforge {

double RewardForSpeedup(double speedup, double reference_speedup) {
  if (!std::isfinite(speedup) || speedup <= 0.0) return 0.0;
  // A reference at or below 1 would make the curve flat or inverted; fall back to 4x.
  const double reference = reference_speedup > 1.0 ? reference_speedup : 4.0;
  const double p = std::log(9.0) / std::log(reference);
  // s^p / (1 + s^p) = 1 / (1 + s^-p), computed in log space so huge speedups cannot overflow.
  return 1.0 / (1.0 + std::exp(-p * std::log(speedup)));
}

double RewardForEvaluation(const v1::EvaluationResult& evaluation, double reference_speedup) {
  if (evaluation.verdict() != v1::PASS) return 0.0;
  return RewardForSpeedup(evaluation.speedup(), reference_speedup);
}

}  // namespace kforge
