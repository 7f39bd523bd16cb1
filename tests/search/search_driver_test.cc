// SearchDriver: the loop over targets with asynchronous evaluations, reproducibility with
// results finishing out of order, resume from checkpoints, stopping, re-confirmation.
#include "services/coordinator/search/search_driver.h"

#include <map>

#include "gtest/gtest.h"
#include "tests/search/search_test_doubles.h"

namespace kforge {
namespace {

using testing::GridProposerForTests;
using testing::MakeTarget;
using testing::SimulatedRunnerForTests;

SearchDriverOptions Options(uint64_t seed, int iterations, int in_flight = 4) {
  SearchDriverOptions options;
  options.seed = seed;
  options.max_in_flight = in_flight;
  options.scheduler.iterations_per_target = iterations;
  options.scheduler.max_in_flight_per_target = in_flight;
  return options;
}

// Serialized trees of a finished run, one per target.
std::vector<std::string> RunAndSerialize(uint64_t seed, SimulatedRunnerForTests::Mode mode,
                                         int in_flight) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner(mode);
  SearchDriver driver(proposer, runner, Options(seed, 40, in_flight));
  EXPECT_TRUE(driver.AddTarget(MakeTarget("a", 0.5)).ok());
  EXPECT_TRUE(driver.AddTarget(MakeTarget("b", 0.3)).ok());
  EXPECT_TRUE(driver.Run().ok());
  std::vector<std::string> trees;
  for (size_t i = 0; i < driver.target_count(); ++i) trees.push_back(driver.tree(i).Serialize());
  return trees;
}

TEST(SearchDriverTest, BestFoundApproachesTheSimulatedOptimumAndIsReconfirmed) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner(SimulatedRunnerForTests::Mode::kThreaded);
  SearchDriver driver(proposer, runner, Options(1, 120));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("softmax", 0.6)).ok());
  std::vector<SearchEvent> events;
  driver.OnProgress([&events](const SearchEvent& e) { events.push_back(e); });
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->targets.size(), 1u);
  const TargetSearchResult& r = result->targets[0];

  const double optimum =
      SimulatedRunnerForTests::SimulatedSpeedup(SimulatedRunnerForTests::kOptimum, 3.0);
  EXPECT_GE(r.search_best_speedup, 0.9 * optimum);
  EXPECT_EQ(r.progress.iterations(), 120);
  EXPECT_EQ(r.stop_reason, StopReason::kIterationBudget);
  // The first iterations were far worse: the search climbed.
  double early_best = 0.0;
  for (const SearchEvent& e : events) {
    if (e.kind == SearchEvent::Kind::kIteration && e.progress.iterations() == 10) {
      early_best = e.progress.best_speedup();
    }
  }
  EXPECT_LT(early_best, r.search_best_speedup);

  // Reported only after a fresh-process run of that very candidate; the runners-up, 20% behind
  // it or more here, are outside the runoff's margin and not re-run.
  ASSERT_TRUE(r.best.has_value());
  EXPECT_TRUE(r.best->evaluation().reconfirmed());
  EXPECT_EQ(r.best->candidate().id(), r.progress.best_candidate_id());
  EXPECT_EQ(r.progress.best_speedup(), r.best->evaluation().speedup());
  int fresh_runs = 0;
  for (const auto& [id, fresh] : runner.calls()) {
    if (!fresh) continue;
    ++fresh_runs;
    EXPECT_EQ(id, r.best->candidate().id());
  }
  EXPECT_EQ(fresh_runs, 1);

  // Progress: one iteration event per result, counts growing by one; a stop and a
  // re-confirmation event.
  int iteration_events = 0;
  for (const SearchEvent& e : events) {
    if (e.kind != SearchEvent::Kind::kIteration) continue;
    ++iteration_events;
    EXPECT_EQ(e.progress.iterations(), iteration_events);
    ASSERT_NE(e.latest, nullptr);
    int counted = 0;
    for (const auto& [verdict, count] : e.progress.verdict_counts()) counted += count;
    EXPECT_EQ(counted, iteration_events);
  }
  EXPECT_EQ(iteration_events, 120);
  EXPECT_EQ(events.back().kind, SearchEvent::Kind::kReconfirmed);
}

TEST(SearchDriverTest, SameSeedGivesIdenticalTreesEvenWhenResultsFinishOutOfOrder) {
  const auto inline_run = RunAndSerialize(7, SimulatedRunnerForTests::Mode::kInline, 4);
  const auto threaded_run = RunAndSerialize(7, SimulatedRunnerForTests::Mode::kThreaded, 4);
  const auto threaded_again = RunAndSerialize(7, SimulatedRunnerForTests::Mode::kThreaded, 4);
  const auto other_seed = RunAndSerialize(8, SimulatedRunnerForTests::Mode::kThreaded, 4);
  EXPECT_EQ(inline_run, threaded_run);
  EXPECT_EQ(threaded_run, threaded_again);
  EXPECT_NE(threaded_run[0], other_seed[0]);
  EXPECT_NE(threaded_run[1], other_seed[1]);
}

TEST(SearchDriverTest, ResumingFromCheckpointsGivesTheSameTreesAsAnUninterruptedRun) {
  const auto uninterrupted = RunAndSerialize(3, SimulatedRunnerForTests::Mode::kThreaded, 3);

  // Interrupt a run after 25 results, keeping each tree's latest checkpoint.
  std::map<size_t, std::string> checkpoints;
  {
    GridProposerForTests proposer;
    SimulatedRunnerForTests runner(SimulatedRunnerForTests::Mode::kThreaded);
    SearchDriver driver(proposer, runner, Options(3, 40, 3));
    ASSERT_TRUE(driver.AddTarget(MakeTarget("a", 0.5)).ok());
    ASSERT_TRUE(driver.AddTarget(MakeTarget("b", 0.3)).ok());
    driver.OnCheckpoint([&checkpoints](size_t target, const SearchTree& tree) {
      checkpoints[target] = tree.Serialize();
    });
    int results = 0;
    driver.OnProgress([&](const SearchEvent& e) {
      if (e.kind == SearchEvent::Kind::kIteration && ++results == 25) driver.Cancel();
    });
    EXPECT_EQ(driver.Run().status().code(), absl::StatusCode::kCancelled);
    int pending = 0;
    for (size_t i = 0; i < driver.target_count(); ++i) {
      pending += static_cast<int>(driver.tree(i).PendingNodes().size());
      EXPECT_EQ(checkpoints[i], driver.tree(i).Serialize()) << "checkpoint lags the tree";
    }
    EXPECT_GT(pending, 0) << "the interruption should leave evaluations in flight";
  }

  // A new coordinator resumes from the stored bytes.
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner(SimulatedRunnerForTests::Mode::kThreaded);
  SearchDriver driver(proposer, runner, Options(3, 40, 3));
  for (size_t i = 0; i < 2; ++i) {
    v1::SearchTreeState state;
    ASSERT_TRUE(state.ParseFromString(checkpoints.at(i)));
    ASSERT_TRUE(driver.ResumeTarget(state).ok());
  }
  ASSERT_TRUE(driver.Run().ok());
  ASSERT_EQ(driver.target_count(), 2u);
  EXPECT_EQ(driver.tree(0).Serialize(), uninterrupted[0]);
  EXPECT_EQ(driver.tree(1).Serialize(), uninterrupted[1]);
}

TEST(SearchDriverTest, StopsATargetNearItsFloorAndSpendsTheRestElsewhere) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchDriver driver(proposer, runner, Options(5, 80));
  // Both peak at 3x. "near": floor 1/2.3 of eager, so any kernel >= 2.3/1.03 = 2.23x stops it
  // (the default factor).
  ASSERT_TRUE(driver.AddTarget(MakeTarget("near", 0.5, 1e-4, 1e-4 / 2.3)).ok());
  ASSERT_TRUE(driver.AddTarget(MakeTarget("far", 0.3, 1e-4, 1e-6)).ok());
  std::map<size_t, StopReason> stopped;  // one stop event per target
  driver.OnProgress([&stopped](const SearchEvent& e) {
    if (e.kind == SearchEvent::Kind::kTargetStopped) {
      EXPECT_TRUE(stopped.emplace(e.target_index, e.stop_reason).second);
    }
  });
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  const TargetSearchResult& near = result->targets[0];
  const TargetSearchResult& far = result->targets[1];
  EXPECT_EQ(near.stop_reason, StopReason::kNearFloor);
  EXPECT_TRUE(near.progress.stopped_near_floor());
  EXPECT_LT(near.progress.iterations(), 80);
  EXPECT_GE(near.search_best_speedup, 2.3 / SchedulerOptions{}.near_floor_factor);
  EXPECT_EQ(far.stop_reason, StopReason::kIterationBudget);
  EXPECT_FALSE(far.progress.stopped_near_floor());
  EXPECT_EQ(far.progress.iterations(), 80);
  EXPECT_EQ(stopped, (std::map<size_t, StopReason>{{0, StopReason::kNearFloor},
                                                   {1, StopReason::kIterationBudget}}));
}

TEST(SearchDriverTest, SpendsEarlyIterationsOnTheTargetWithTheLargerExpectedGain) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchDriver driver(proposer, runner, Options(5, 200, 1));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("small", 0.05)).ok());
  ASSERT_TRUE(driver.AddTarget(MakeTarget("large", 0.6)).ok());
  std::map<size_t, int> first_sixty;
  int seen = 0;
  driver.OnProgress([&](const SearchEvent& e) {
    if (e.kind == SearchEvent::Kind::kIteration && ++seen <= 60) ++first_sixty[e.target_index];
  });
  ASSERT_TRUE(driver.Run().ok());
  EXPECT_GT(first_sixty[1], 3 * first_sixty[0]);
  EXPECT_GT(first_sixty[0], 0);
}

TEST(SearchDriverTest, TheWallTimeBudgetStopsDispatchingAndStillReconfirms) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchDriverOptions options = Options(2, 1000, 1);
  double fake_now_s = 0.0;  // a test clock: one second passes per reading
  options.clock = [&fake_now_s] { return fake_now_s += 1.0; };
  options.time_budget_s = 30.0;
  SearchDriver driver(proposer, runner, options);
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  const TargetSearchResult& r = result->targets[0];
  EXPECT_EQ(r.stop_reason, StopReason::kTimeBudget);
  EXPECT_GT(r.progress.iterations(), 0);
  EXPECT_LT(r.progress.iterations(), 30);
  EXPECT_TRUE(r.best.has_value());
}

TEST(SearchDriverTest, AWinnerThatFailsInAFreshProcessGivesWayToTheNextBest) {
  std::string search_winner;
  {
    GridProposerForTests proposer;
    SimulatedRunnerForTests runner;
    SearchDriver driver(proposer, runner, Options(11, 30));
    ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
    absl::StatusOr<SearchResult> result = driver.Run();
    ASSERT_TRUE(result.ok());
    search_winner = result->targets[0].progress.best_candidate_id();
  }
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  runner.fail_in_fresh_process(search_winner);
  SearchDriver driver(proposer, runner, Options(11, 30));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok());
  const TargetSearchResult& r = result->targets[0];
  const std::vector<int> ranked = driver.tree(0).PassingNodesBySpeedup();
  ASSERT_GE(ranked.size(), 2u);
  EXPECT_EQ(driver.tree(0).node(ranked[0]).candidate_id(), search_winner);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->candidate().id(), driver.tree(0).node(ranked[1]).candidate_id());
  EXPECT_TRUE(r.best->evaluation().reconfirmed());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("NONDETERMINISTIC"), std::string::npos);
}

// The search's best timing is the best of many noisy ones; the runoff re-times its fastest
// candidates in fresh processes and reports the one that is fastest there. (The simulated
// runners-up are 20% behind the best: a margin of 1 lets them in.)
SearchDriverOptions RunoffOptions(double margin, int runoff = 3) {
  SearchDriverOptions options = Options(11, 30);
  options.runoff_margin = margin;
  options.runoff = runoff;
  return options;
}

TEST(SearchDriverTest, TheRunoffReportsTheCandidateFastestInAFreshProcess) {
  std::vector<std::string> top;
  {
    GridProposerForTests proposer;
    SimulatedRunnerForTests runner;
    SearchDriver driver(proposer, runner, Options(11, 30));
    ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
    ASSERT_TRUE(driver.Run().ok());
    for (int node : driver.tree(0).PassingNodesBySpeedup()) {
      top.push_back(driver.tree(0).node(node).candidate_id());
    }
  }
  ASSERT_GE(top.size(), 4u);
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  runner.set_fresh_speedup(top[0], 1.50);
  runner.set_fresh_speedup(top[1], 1.40);
  runner.set_fresh_speedup(top[2], 1.60);
  runner.set_fresh_speedup(top[3], 9.00);  // outside the runoff: never re-run
  SearchDriver driver(proposer, runner, RunoffOptions(1.0));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  const TargetSearchResult& r = result->targets[0];
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->candidate().id(), top[2]);
  EXPECT_EQ(r.progress.best_candidate_id(), top[2]);
  EXPECT_DOUBLE_EQ(r.progress.best_speedup(), 1.60);
  EXPECT_GT(r.search_best_speedup, 1.60);  // the search's own view stays as it was
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find(top[1].substr(0, 12) + " 1.400x"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find(top[2].substr(0, 12) + " won"), std::string::npos) << r.notes[0];

  // One run in a fresh process: the search's best, as before the runoff.
  GridProposerForTests proposer_one;
  SimulatedRunnerForTests runner_one;
  runner_one.set_fresh_speedup(top[2], 1.60);
  SearchDriver single(proposer_one, runner_one, RunoffOptions(1.0, 1));
  ASSERT_TRUE(single.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> single_result = single.Run();
  ASSERT_TRUE(single_result.ok());
  EXPECT_EQ(single_result->targets[0].progress.best_candidate_id(), top[0]);
  EXPECT_TRUE(single_result->targets[0].notes.empty());

  // Runners-up further behind than the margin are not re-run.
  GridProposerForTests proposer_margin;
  SimulatedRunnerForTests runner_margin;
  runner_margin.set_fresh_speedup(top[2], 1.60);
  SearchDriver narrow(proposer_margin, runner_margin, RunoffOptions(0.03));
  ASSERT_TRUE(narrow.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> narrow_result = narrow.Run();
  ASSERT_TRUE(narrow_result.ok());
  EXPECT_EQ(narrow_result->targets[0].progress.best_candidate_id(), top[0]);
  int fresh_runs = 0;
  for (const auto& [id, fresh] : runner_margin.calls()) fresh_runs += fresh ? 1 : 0;
  EXPECT_EQ(fresh_runs, 1);
}

TEST(SearchDriverTest, ProposerRefusalsErrorsAndExhaustionStopOnlyThatTarget) {
  GridProposerForTests refusing;
  refusing.set_refusal("no synthesizer family covers aten::nonzero");
  SimulatedRunnerForTests runner;
  SearchDriver driver(refusing, runner, Options(1, 10));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> result = driver.Run();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->targets[0].stop_reason, StopReason::kRefused);
  EXPECT_EQ(result->targets[0].error, "no synthesizer family covers aten::nonzero");
  EXPECT_FALSE(result->targets[0].best.has_value());

  GridProposerForTests failing;
  failing.set_error(absl::UnavailableError("llm endpoint down"));
  SearchDriver driver2(failing, runner, Options(1, 10));
  ASSERT_TRUE(driver2.AddTarget(MakeTarget("t", 0.5)).ok());
  result = driver2.Run();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->targets[0].stop_reason, StopReason::kProposerError);
  EXPECT_NE(result->targets[0].error.find("llm endpoint down"), std::string::npos);

  GridProposerForTests few;
  few.set_neighbours(false);
  few.set_root_limit(2);
  SearchDriver driver3(few, runner, Options(1, 10));
  ASSERT_TRUE(driver3.AddTarget(MakeTarget("t", 0.5)).ok());
  result = driver3.Run();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->targets[0].stop_reason, StopReason::kExhausted);
  EXPECT_EQ(result->targets[0].progress.iterations(), 2);
}

TEST(SearchDriverTest, ARunnerFailureStopsTheRunWithItsError) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner(SimulatedRunnerForTests::Mode::kThreaded);
  runner.set_runner_error(absl::UnavailableError("no workers registered"));
  SearchDriver driver(proposer, runner, Options(1, 10));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  absl::StatusOr<SearchResult> result = driver.Run();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("no workers registered"), std::string::npos);
  EXPECT_FALSE(driver.Run().ok());  // once per driver
}

TEST(SearchDriverTest, RejectsTheSameTargetTwice) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchDriver driver(proposer, runner, Options(1, 10));
  ASSERT_TRUE(driver.AddTarget(MakeTarget("t", 0.5)).ok());
  EXPECT_EQ(driver.AddTarget(MakeTarget("t", 0.5)).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(SearchDriverTest, TreeSeedsDependOnRunSeedAndTargetOnly) {
  EXPECT_EQ(SearchDriver::TreeSeed(1, "a"), SearchDriver::TreeSeed(1, "a"));
  EXPECT_NE(SearchDriver::TreeSeed(1, "a"), SearchDriver::TreeSeed(2, "a"));
  EXPECT_NE(SearchDriver::TreeSeed(1, "a"), SearchDriver::TreeSeed(1, "b"));
}

}  // namespace
}  // namespace kforge
