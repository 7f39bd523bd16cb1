// TargetScheduler: spends a job's iteration budget across its targets where the expected
// end-to-end gain is largest, and says when a target is done (DESIGN.md, "MCTS").
//
// Expected gain of a target = the share of the forward pass still removable by it:
//   gain = share * max(0, 1 / best_speedup - floor_s / eager_time_s)
// i.e. (current best time - floor time) * calls / forward time, with the floor taken as 0
// when unknown. Priority = gain * (untried_bonus if the target has had no iteration yet)
// / (1 + iterations): returns diminish with the iterations already spent, so over a run the
// iterations a target gets are about proportional to its gain, and an untried target is
// worth more than its estimate (the estimate of a target nobody has searched is the least
// informed one). Ties go to the lower index. A pure function of its inputs: deterministic.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace kforge {

struct SchedulerOptions {
  int iterations_per_target = 64;  // budget per target (dispatched evaluations)
  int max_in_flight_per_target = 2;
  // Stop when best time <= factor * floor; 0: never. The floor is taken at the measured copy
  // bandwidth, which streaming kernels come within a few percent of: on the H200,
  // torch.compile's kernel for a ResNet-50 batch norm chain ran at 1.046x its floor, and a stop
  // at 1.1x ended kforge's search of it after one candidate, at 1.058x.
  double near_floor_factor = 1.03;
  double untried_bonus = 2.0;
};

// What the scheduler knows of one target.
struct TargetStatus {
  double share = 0.0;         // of the forward pass, from the capture
  double eager_time_s = 0.0;  // per call
  double floor_s = 0.0;       // speed-of-light floor per call; 0 when unknown
  int iterations = 0;         // dispatched evaluations, in-flight ones included
  int in_flight = 0;
  double best_speedup = 1.0;  // best passing speedup so far; 1 (eager) when none
  bool finished = false;      // stopped for a reason the scheduler cannot see (exhausted...)
};

enum class StopReason {
  kNone,
  kNearFloor,        // best time within near_floor_factor of the floor
  kIterationBudget,  // iterations_per_target spent
  kExhausted,        // the proposer has nothing new for any node
  kRefused,          // the proposer covers no family of this target
  kProposerError,
  kTimeBudget,  // the job's wall-time budget ran out
  kCancelled,
};
std::string_view StopReasonName(StopReason reason);

class TargetScheduler {
 public:
  explicit TargetScheduler(SchedulerOptions options) : options_(options) {}

  const SchedulerOptions& options() const { return options_; }
  double ExpectedGain(const TargetStatus& target) const;
  double Priority(const TargetStatus& target) const;
  bool NearFloor(const TargetStatus& target) const;
  // kNearFloor or kIterationBudget when the scheduler stops the target, else kNone.
  StopReason StopReasonFor(const TargetStatus& target) const;
  // The target to run the next iteration on: not finished, not stopped, below its in-flight
  // cap, highest priority. nullopt when none qualifies.
  std::optional<size_t> Pick(const std::vector<TargetStatus>& targets) const;

 private:
  SchedulerOptions options_;
};

}  // namespace kforge
