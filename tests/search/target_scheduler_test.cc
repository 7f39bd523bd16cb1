// TargetScheduler: expected-gain priority, exploration of untried targets, stopping rules.
#include "services/coordinator/search/target_scheduler.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

TargetStatus Status(double share, double best_speedup = 1.0, int iterations = 0,
                    double eager_time_s = 1e-4, double floor_s = 0.0) {
  TargetStatus t;
  t.share = share;
  t.best_speedup = best_speedup;
  t.iterations = iterations;
  t.eager_time_s = eager_time_s;
  t.floor_s = floor_s;
  return t;
}

TEST(TargetSchedulerTest, ExpectedGainIsShareTimesRemainingHeadroomToTheFloor) {
  TargetScheduler scheduler(SchedulerOptions{});
  // share 0.4, best 2x, floor a quarter of eager: (1/2 - 1/4) of 40% of the forward pass.
  EXPECT_DOUBLE_EQ(scheduler.ExpectedGain(Status(0.4, 2.0, 0, 1e-4, 2.5e-5)), 0.4 * 0.25);
  // Unknown floor: the whole remaining time is headroom.
  EXPECT_DOUBLE_EQ(scheduler.ExpectedGain(Status(0.4, 2.0)), 0.2);
  // Slower than eager found so far: eager still stands, headroom is not inflated.
  EXPECT_DOUBLE_EQ(scheduler.ExpectedGain(Status(0.4, 0.5)), 0.4);
  // At or below the floor: no gain left.
  EXPECT_DOUBLE_EQ(scheduler.ExpectedGain(Status(0.4, 5.0, 0, 1e-4, 2.5e-5)), 0.0);
}

TEST(TargetSchedulerTest, FavoursTheTargetWithLargerShareTimesHeadroom) {
  TargetScheduler scheduler(SchedulerOptions{});
  EXPECT_EQ(scheduler.Pick({Status(0.1), Status(0.6)}), std::optional<size_t>(1));
  // Same share and iterations, but the first is already 3x with its floor close behind.
  EXPECT_EQ(scheduler.Pick({Status(0.5, 3.0, 4, 1e-4, 2.5e-5), Status(0.5, 1.2, 4, 1e-4, 2.5e-5)}),
            std::optional<size_t>(1));
  // A smaller share with much more headroom beats a larger share with little.
  EXPECT_EQ(scheduler.Pick({Status(0.5, 3.5, 4, 1e-4, 2.5e-5), Status(0.3, 1.0, 4, 1e-4, 2.5e-5)}),
            std::optional<size_t>(1));
}

TEST(TargetSchedulerTest, SpreadsIterationsRoughlyByGainAndTriesEveryTarget) {
  TargetScheduler scheduler(SchedulerOptions{.iterations_per_target = 1000});
  std::vector<TargetStatus> targets = {Status(0.6), Status(0.3), Status(0.05)};
  for (int i = 0; i < 190; ++i) {
    const std::optional<size_t> pick = scheduler.Pick(targets);
    ASSERT_TRUE(pick);
    ++targets[*pick].iterations;
  }
  EXPECT_GT(targets[0].iterations, targets[1].iterations);
  EXPECT_GT(targets[1].iterations, targets[2].iterations);
  EXPECT_GT(targets[2].iterations, 0);  // the small one was explored too
  EXPECT_NEAR(static_cast<double>(targets[0].iterations) / targets[1].iterations, 2.0, 0.3);
}

TEST(TargetSchedulerTest, AnUntriedTargetBeatsAWellExploredLargerOne) {
  TargetScheduler scheduler(SchedulerOptions{});
  EXPECT_EQ(scheduler.Pick({Status(0.5, 1.0, 10), Status(0.1, 1.0, 0)}), std::optional<size_t>(1));
  EXPECT_GT(scheduler.Priority(Status(0.1, 1.0, 0)), scheduler.Priority(Status(0.1, 1.0, 1)));
}

TEST(TargetSchedulerTest, StopsATargetNearItsFloor) {
  TargetScheduler scheduler(SchedulerOptions{.near_floor_factor = 1.1});
  // eager 100 us, floor 30 us: 3.1x -> 32.3 us <= 33 us stops; 2.9x -> 34.5 us does not.
  const TargetStatus near = Status(0.9, 3.1, 5, 1e-4, 3e-5);
  const TargetStatus not_yet = Status(0.1, 2.9, 5, 1e-4, 3e-5);
  EXPECT_TRUE(scheduler.NearFloor(near));
  EXPECT_EQ(scheduler.StopReasonFor(near), StopReason::kNearFloor);
  EXPECT_EQ(scheduler.StopReasonFor(not_yet), StopReason::kNone);
  EXPECT_EQ(scheduler.Pick({near, not_yet}), std::optional<size_t>(1));
  EXPECT_EQ(scheduler.Pick({near}), std::nullopt);
  // Without a known floor the search never claims to be near it.
  EXPECT_FALSE(scheduler.NearFloor(Status(0.9, 50.0, 5)));
  // A factor of 0 (kforge optimize --stop-near-floor 0) spends every iteration, even at the floor.
  TargetScheduler never(SchedulerOptions{.near_floor_factor = 0});
  EXPECT_FALSE(never.NearFloor(Status(0.9, 3.4, 5, 1e-4, 3e-5)));
  EXPECT_EQ(never.StopReasonFor(Status(0.9, 3.4, 5, 1e-4, 3e-5)), StopReason::kNone);
}

TEST(TargetSchedulerTest, RespectsIterationBudgetInFlightCapAndFinishedTargets) {
  TargetScheduler scheduler(
      SchedulerOptions{.iterations_per_target = 8, .max_in_flight_per_target = 2});
  TargetStatus spent = Status(0.9, 1.0, 8);
  EXPECT_EQ(scheduler.StopReasonFor(spent), StopReason::kIterationBudget);
  TargetStatus busy = Status(0.9, 1.0, 3);
  busy.in_flight = 2;
  TargetStatus finished = Status(0.9);
  finished.finished = true;
  EXPECT_EQ(scheduler.Pick({spent, busy, finished}), std::nullopt);
  EXPECT_EQ(scheduler.Pick({spent, busy, finished, Status(0.0)}), std::optional<size_t>(3));
}

TEST(TargetSchedulerTest, TiesGoToTheLowerIndex) {
  TargetScheduler scheduler(SchedulerOptions{});
  EXPECT_EQ(scheduler.Pick({Status(0.2), Status(0.2), Status(0.2)}), std::optional<size_t>(0));
}

}  // namespace
}  // namespace kforge
