// TargetScheduler: expected-gain allocation of iterations across targets.
#include "services/coordinator/search/target_scheduler.h"

#include <algorithm>

namespace kforge {

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "none";
    case StopReason::kNearFloor:
      return "near_floor";
    case StopReason::kIterationBudget:
      return "iteration_budget";
    case StopReason::kExhausted:
      return "exhausted";
    case StopReason::kRefused:
      return "refused";
    case StopReason::kProposerError:
      return "proposer_error";
    case StopReason::kTimeBudget:
      return "time_budget";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

double TargetScheduler::ExpectedGain(const TargetStatus& target) const {
  const double best = std::max(target.best_speedup, 1.0);  // eager is always available
  const double floor_fraction =
      target.eager_time_s > 0.0 ? std::max(target.floor_s, 0.0) / target.eager_time_s : 0.0;
  return std::max(target.share, 0.0) * std::max(0.0, 1.0 / best - floor_fraction);
}

double TargetScheduler::Priority(const TargetStatus& target) const {
  const double bonus = target.iterations == 0 ? options_.untried_bonus : 1.0;
  return ExpectedGain(target) * bonus / (1.0 + target.iterations);
}

bool TargetScheduler::NearFloor(const TargetStatus& target) const {
  if (target.floor_s <= 0.0 || target.eager_time_s <= 0.0 || target.best_speedup <= 0.0) {
    return false;
  }
  const double best_time_s = target.eager_time_s / target.best_speedup;
  return best_time_s <= options_.near_floor_factor * target.floor_s;
}

StopReason TargetScheduler::StopReasonFor(const TargetStatus& target) const {
  if (NearFloor(target)) return StopReason::kNearFloor;
  if (target.iterations >= options_.iterations_per_target) return StopReason::kIterationBudget;
  return StopReason::kNone;
}

std::optional<size_t> TargetScheduler::Pick(const std::vector<TargetStatus>& targets) const {
  std::optional<size_t> best;
  double best_priority = 0.0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const TargetStatus& t = targets[i];
    if (t.finished || StopReasonFor(t) != StopReason::kNone) continue;
    if (t.in_flight >= std::max(1, options_.max_in_flight_per_target)) continue;
    const double priority = Priority(t);
    // Strictly greater: ties keep the lower index. A zero-priority target is still picked
    // when nothing else qualifies; its own budget bounds it.
    if (!best || priority > best_priority) {
      best = i;
      best_priority = priority;
    }
  }
  return best;
}

}  // namespace kforge
