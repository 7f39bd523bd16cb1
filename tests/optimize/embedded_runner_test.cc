// EmbeddedRunner: the pool logic (one evaluation per GPU at a time, every GPU used, fresh
// process passed through, compile failures and missing GPUs as data) with test-double lanes.
#include "services/coordinator/embedded/embedded_runner.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/optimize/fake_gpu_lane.h"

namespace kforge {
namespace {

using testing::FakeCompileForTests;
using testing::FakeGpuLaneForTests;
using testing::FakeGpuPool;

v1::Target MakeTarget(const std::string& id) {
  v1::Target target;
  target.set_id(id);
  target.mutable_captured_inputs()->set_sha256(id + "-inputs");
  return target;
}

v1::Candidate MakeCandidate(const std::string& id) {
  v1::Candidate candidate;
  candidate.set_id(id);
  candidate.set_source("extern \"C\" __global__ void k() {}");
  return candidate;
}

struct Harness {
  explicit Harness(int lanes, int compile_threads = 2) {
    std::vector<std::unique_ptr<GpuLane>> owned;
    for (int i = 0; i < lanes; ++i) {
      auto lane = std::make_unique<FakeGpuLaneForTests>(i, &pool);
      fakes.push_back(lane.get());
      owned.push_back(std::move(lane));
    }
    EmbeddedRunnerOptions options;
    options.compile.set_arch("sm_90");
    options.compile_threads = compile_threads;
    runner = std::make_unique<EmbeddedRunner>(
        FakeCompileForTests,
        [this](const v1::Target& target) -> absl::StatusOr<std::string> {
          ++fetches;
          if (target.id() == "missing") return absl::NotFoundError("no inputs for missing");
          return "inputs-of-" + target.id();
        },
        std::move(owned), options);
  }

  std::future<absl::StatusOr<RunOutcome>> Run(const v1::Target& target, const std::string& id,
                                              bool fresh = false) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<RunOutcome>>>();
    auto future = promise->get_future();
    runner->Run(
        target, MakeCandidate(id), RunOptions{.fresh_process = fresh},
        [promise](absl::StatusOr<RunOutcome> outcome) { promise->set_value(std::move(outcome)); });
    return future;
  }

  FakeGpuPool pool;
  std::vector<FakeGpuLaneForTests*> fakes;
  std::atomic<int> fetches{0};
  std::unique_ptr<EmbeddedRunner> runner;
};

TEST(EmbeddedRunnerTest, EachGpuRunsOneEvaluationAtATimeAndEveryGpuIsUsed) {
  Harness h(/*lanes=*/2, /*compile_threads=*/4);
  for (auto* fake : h.fakes) {
    fake->overlap_wanted = 2;  // hold each GPU until both are busy (or 2 s pass)
    fake->hold_ms = 2000;
  }
  const v1::Target target = MakeTarget("t");
  std::vector<std::future<absl::StatusOr<RunOutcome>>> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(h.Run(target, absl::StrCat("c", i)));
  for (auto& f : futures) {
    absl::StatusOr<RunOutcome> outcome = f.get();
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->compile.status(), v1::COMPILE_OK);
    EXPECT_EQ(EffectiveVerdict(*outcome), v1::PASS);
    EXPECT_FALSE(outcome->compile.cubin().empty());  // the winner's cubin reaches the caller
  }
  EXPECT_EQ(h.fakes[0]->max_concurrent_here(), 1);
  EXPECT_EQ(h.fakes[1]->max_concurrent_here(), 1);
  EXPECT_EQ(h.pool.max_active, 2);  // both GPUs were busy at once
  const EmbeddedRunnerStats stats = h.runner->stats();
  ASSERT_EQ(stats.evaluations_per_lane.size(), 2u);
  EXPECT_GE(stats.evaluations_per_lane[0], 1);
  EXPECT_GE(stats.evaluations_per_lane[1], 1);
  EXPECT_EQ(stats.evaluations_per_lane[0] + stats.evaluations_per_lane[1], 8);
  EXPECT_EQ(stats.compiles, 8);
  EXPECT_EQ(stats.compiled_ok, 8);
}

TEST(EmbeddedRunnerTest, FreshProcessAndPolicyReachTheGpu) {
  Harness h(1);
  const v1::Target target = MakeTarget("t");
  ASSERT_TRUE(h.Run(target, "normal").get().ok());
  absl::StatusOr<RunOutcome> fresh = h.Run(target, "winner", /*fresh=*/true).get();
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->evaluation.reconfirmed());
  std::vector<v1::EvaluateRequest> requests = h.fakes[0]->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(requests[0].fresh_process());
  EXPECT_TRUE(requests[1].fresh_process());
  EXPECT_EQ(requests[1].candidate().id(), "winner");
  EXPECT_EQ(requests[1].options().arch(), "sm_90");
  EXPECT_TRUE(requests[1].timing());
  EXPECT_EQ(requests[1].policy().version(), kValidationPolicyVersion);
  EXPECT_GE(requests[1].policy().random_input_sets(), 3);
}

TEST(EmbeddedRunnerTest, CapturedInputsAreFetchedOncePerTarget) {
  Harness h(2);
  std::vector<std::future<absl::StatusOr<RunOutcome>>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(h.Run(MakeTarget("a"), absl::StrCat("a", i)));
  for (int i = 0; i < 3; ++i) futures.push_back(h.Run(MakeTarget("b"), absl::StrCat("b", i)));
  for (auto& f : futures) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(h.fetches.load(), 2);
  for (auto* fake : h.fakes) {
    std::vector<v1::EvaluateRequest> requests = fake->requests();
    std::vector<std::string> inputs = fake->inputs();
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(inputs[i], "inputs-of-" + requests[i].target().id());
    }
  }
}

TEST(EmbeddedRunnerTest, CompileFailureIsReturnedWithoutEvaluation) {
  Harness h(1);
  absl::StatusOr<RunOutcome> outcome = h.Run(MakeTarget("t"), "bad-kernel").get();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->compile.status(), v1::COMPILE_FAILED);
  EXPECT_EQ(EffectiveVerdict(*outcome), v1::COMPILE_ERROR);
  EXPECT_TRUE(h.fakes[0]->requests().empty());
  EXPECT_EQ(h.runner->stats().compiled_ok, 0);
}

TEST(EmbeddedRunnerTest, WithoutGpusItCompilesOnlyAndSaysSo) {
  Harness h(/*lanes=*/0);
  absl::StatusOr<RunOutcome> ok = h.Run(MakeTarget("t"), "good").get();
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->compile.status(), v1::COMPILE_OK);
  EXPECT_EQ(ok->evaluation.verdict(), v1::NOT_EVALUATED);
  EXPECT_EQ(ok->evaluation.diagnostics().message(), kNoGpuMessage);
  absl::StatusOr<RunOutcome> bad = h.Run(MakeTarget("t"), "bad").get();
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(EffectiveVerdict(*bad), v1::COMPILE_ERROR);
  EXPECT_EQ(h.fetches.load(), 0);  // nothing to validate, nothing fetched
}

TEST(EmbeddedRunnerTest, AGpuThatCannotEvaluateFailsTheRunNotTheCandidate) {
  Harness h(1);
  h.fakes[0]->verdict = v1::NOT_EVALUATED;
  absl::StatusOr<RunOutcome> outcome = h.Run(MakeTarget("t"), "c").get();
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(outcome.status())) << outcome.status();
  EXPECT_NE(outcome.status().message().find("FakeGPU 0"), std::string::npos);
}

TEST(EmbeddedRunnerTest, MissingCapturedInputsFailTheRun) {
  Harness h(1);
  absl::StatusOr<RunOutcome> outcome = h.Run(MakeTarget("missing"), "c").get();
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsNotFound(outcome.status())) << outcome.status();
}

TEST(EmbeddedRunnerTest, ShutdownDeliversQueuedWorkAsCancelled) {
  Harness h(1);
  {
    std::lock_guard<std::mutex> lock(h.pool.mu);
    h.pool.gate_open = false;
  }
  std::vector<std::future<absl::StatusOr<RunOutcome>>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(h.Run(MakeTarget("t"), absl::StrCat("c", i)));
  // Wait until the GPU holds one and the other three are compiled and queued.
  {
    std::unique_lock<std::mutex> lock(h.pool.mu);
    h.pool.changed.wait(lock, [&] { return h.pool.started == 1; });
  }
  while (h.runner->stats().compiles < 4) std::this_thread::yield();
  // Two compile threads: whichever candidate compiled first holds the GPU, not always c0.
  const std::string running = h.fakes[0]->requests().at(0).candidate().id();
  std::thread shutdown([&] { h.runner->Shutdown(); });
  // Queued work is answered before Shutdown waits for the running evaluation.
  for (int i = 0; i < 4; ++i) {
    if (absl::StrCat("c", i) == running) continue;
    absl::StatusOr<RunOutcome> outcome = futures[i].get();
    EXPECT_TRUE(absl::IsCancelled(outcome.status())) << outcome.status();
  }
  {
    std::lock_guard<std::mutex> lock(h.pool.mu);
    h.pool.gate_open = true;
  }
  h.pool.changed.notify_all();
  shutdown.join();
  EXPECT_TRUE(futures[running.back() - '0'].get().ok());
  absl::StatusOr<RunOutcome> late = h.Run(MakeTarget("t"), "late").get();
  EXPECT_TRUE(absl::IsCancelled(late.status()));
}

}  // namespace
}  // namespace kforge
