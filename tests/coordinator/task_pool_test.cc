// TaskPool and PoolCandidateRunner: waiters, merging by content hash, long-poll, lapses and
// the retry cap, arch routing, results persisted in a (local-directory) store, shutdown.
// In-process "workers" are plain calls to Lease/Complete; the lease clock is a test clock.
#include "services/coordinator/pool/task_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "common/store.h"
#include "gtest/gtest.h"
#include "kforge/v1/worker.pb.h"
#include "services/coordinator/pool/pool_runner.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using Result = absl::StatusOr<std::string>;

struct TestClock {
  std::atomic<double> now{1000.0};
  LeaseTable::Clock fn() {
    return [this] { return now.load(); };
  }
};

v1::Task MakeTask(const std::string& payload, v1::TaskKind kind = v1::TASK_EVALUATE) {
  v1::CompileRequest request;
  request.mutable_candidate()->set_source(payload);
  v1::Task task;
  task.set_task_id(TaskId(kind, request));
  task.set_kind(kind);
  task.set_request(request.SerializeAsString());
  return task;
}

v1::WorkerInfo Worker(const std::string& id, const std::string& arch, int max_outstanding = 2) {
  v1::WorkerInfo info;
  info.set_worker_id(id);
  if (!arch.empty()) info.add_gpus()->set_arch(arch);
  info.set_max_outstanding(max_outstanding);
  return info;
}

// Collects one callback's result.
struct Waiter {
  std::promise<Result> promise;
  std::future<Result> future = promise.get_future();
  TaskPool::ResultCallback callback() {
    return [this](Result r) { promise.set_value(std::move(r)); };
  }
  std::optional<Result> Get(double timeout_s = 10) {
    if (future.wait_for(std::chrono::duration<double>(timeout_s)) != std::future_status::ready) {
      return std::nullopt;
    }
    return future.get();
  }
};

// The value of a delivered result; a marker string when none came or it was an error.
std::string Value(const std::optional<Result>& result) {
  if (!result) return "<no result>";
  if (!result->ok()) return "<error: " + result->status().ToString() + ">";
  return **result;
}

TEST(TaskIdTest, IsAContentHashOfKindAndRequest) {
  EXPECT_EQ(MakeTask("a").task_id(), MakeTask("a").task_id());
  EXPECT_NE(MakeTask("a").task_id(), MakeTask("b").task_id());
  EXPECT_NE(MakeTask("a", v1::TASK_COMPILE).task_id(), MakeTask("a").task_id());
  EXPECT_EQ(MakeTask("a").task_id().size(), 64u);
}

TEST(TaskPoolTest, ResultGoesToEveryWaiterOnceAndDuplicatesMerge) {
  Waiter first, second, third;
  TaskPool pool;
  pool.Submit(MakeTask("k"), "sm_90", first.callback());
  pool.Submit(MakeTask("k"), "sm_90", second.callback());  // in flight: merges
  absl::StatusOr<std::vector<v1::Task>> leased = pool.Lease(Worker("w", "sm_90"), 0, 0);
  ASSERT_TRUE(leased.ok());
  ASSERT_EQ(leased->size(), 1u);  // one task, not two
  const v1::Task& task = (*leased)[0];
  EXPECT_TRUE(pool.Complete("w", task.lease_id(), task.task_id(), "result-1"));
  EXPECT_EQ(Value(first.Get()), "result-1");
  EXPECT_EQ(Value(second.Get()), "result-1");
  // A repeat completion is accepted and changes nothing; a later submit gets the result.
  EXPECT_TRUE(pool.Complete("w", task.lease_id(), task.task_id(), "result-2"));
  pool.Submit(MakeTask("k"), "sm_90", third.callback());
  EXPECT_EQ(Value(third.Get(0)), "result-1");
  EXPECT_EQ(pool.Stats().waiting_tasks, 0);
}

TEST(TaskPoolTest, EvaluateTasksGoOnlyToTheirArchAndCompilesToAnyWorker) {
  Waiter evaluate, compile;  // outlive the pool, which cancels them when destroyed
  TaskPool pool;
  pool.Submit(MakeTask("e"), "sm_90", evaluate.callback());
  pool.Submit(MakeTask("c", v1::TASK_COMPILE), "", compile.callback());
  absl::StatusOr<std::vector<v1::Task>> cpu_only = pool.Lease(Worker("cpu", ""), 0, 0);
  ASSERT_TRUE(cpu_only.ok());
  ASSERT_EQ(cpu_only->size(), 1u);
  EXPECT_EQ((*cpu_only)[0].kind(), v1::TASK_COMPILE);
  absl::StatusOr<std::vector<v1::Task>> other_arch = pool.Lease(Worker("a100", "sm_80"), 0, 0);
  ASSERT_TRUE(other_arch.ok());
  EXPECT_TRUE(other_arch->empty());
  absl::StatusOr<std::vector<v1::Task>> h100 = pool.Lease(Worker("h100", "sm_90"), 0, 0);
  ASSERT_TRUE(h100.ok());
  ASSERT_EQ(h100->size(), 1u);
  EXPECT_EQ((*h100)[0].kind(), v1::TASK_EVALUATE);
  ASSERT_TRUE(pool.WorkerGpu("sm_90").has_value());
  EXPECT_FALSE(pool.WorkerGpu("sm_75").has_value());
}

TEST(TaskPoolTest, LongPollReturnsWhenATaskIsQueued) {
  Waiter waiter;
  TaskPool pool;
  std::future<absl::StatusOr<std::vector<v1::Task>>> lease =
      std::async(std::launch::async, [&] { return pool.Lease(Worker("w", "sm_90"), 1, 30); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pool.Submit(MakeTask("x"), "sm_90", waiter.callback());
  ASSERT_EQ(lease.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  absl::StatusOr<std::vector<v1::Task>> tasks = lease.get();
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
}

TEST(TaskPoolTest, LapsedLeaseRequeuesThenFailsAtTheRetryCap) {
  Waiter waiter;
  TestClock clock;
  TaskPoolOptions options;
  options.leases.lease_duration_s = 10;
  options.leases.max_attempts = 2;
  options.lapse_interval_s = 0.01;
  TaskPool pool(options, nullptr, clock.fn());
  pool.Submit(MakeTask("poison"), "sm_90", waiter.callback());
  absl::StatusOr<std::vector<v1::Task>> first = pool.Lease(Worker("a", "sm_90"), 0, 0);
  ASSERT_TRUE(first.ok() && first->size() == 1u);
  clock.now = clock.now + 11;  // worker a went silent
  absl::StatusOr<std::vector<v1::Task>> second = pool.Lease(Worker("b", "sm_90"), 0, 0);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].attempt(), 2);
  // a's late result is stale.
  EXPECT_FALSE(pool.Complete("a", (*first)[0].lease_id(), (*first)[0].task_id(), "late"));
  clock.now = clock.now + 11;  // b went silent too: the retry cap
  std::optional<Result> result = waiter.Get();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(absl::IsAborted(result->status())) << result->status();
  EXPECT_NE(result->status().message().find("lapsed 2 times"), std::string::npos);
  EXPECT_EQ(pool.Stats().table.lease_expiries_total, 2);
}

TEST(TaskPoolTest, ResultsPersistInTheStoreForTheNextCoordinator) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + dir.str());
  ASSERT_TRUE(store.ok());
  {
    TaskPool pool({}, store->get());
    Waiter waiter;
    pool.Submit(MakeTask("persist"), "sm_90", waiter.callback());
    absl::StatusOr<std::vector<v1::Task>> leased = pool.Lease(Worker("w", "sm_90"), 0, 0);
    ASSERT_TRUE(leased.ok() && leased->size() == 1u);
    ASSERT_TRUE(pool.Complete("w", (*leased)[0].lease_id(), (*leased)[0].task_id(), "kept"));
    EXPECT_EQ(Value(waiter.Get()), "kept");
  }
  TaskPool restarted({}, store->get());
  Waiter waiter;
  restarted.Submit(MakeTask("persist"), "sm_90", waiter.callback());
  EXPECT_EQ(Value(waiter.Get(0)), "kept");  // answered at once, nothing queued
  EXPECT_EQ(restarted.Stats().table.queued, 0);
  EXPECT_EQ(restarted.Stats().store_hits_total, 1);
}

TEST(TaskPoolTest, FailedResultsAreKeptInTheStoreOnlyBriefly) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + dir.str());
  ASSERT_TRUE(store.ok());
  TaskPoolOptions options;
  options.failure_ttl = std::chrono::seconds(1);
  Waiter pass, mismatch;
  {
    TaskPool pool(options, store->get());
    for (auto [name, verdict, waiter] : {std::make_tuple("pass", v1::PASS, &pass),
                                         std::make_tuple("mismatch", v1::MISMATCH, &mismatch)}) {
      pool.Submit(MakeTask(name), "sm_90", waiter->callback());
      absl::StatusOr<std::vector<v1::Task>> leased = pool.Lease(Worker("w", "sm_90"), 1, 0);
      ASSERT_TRUE(leased.ok() && leased->size() == 1u);
      v1::EvaluationResult result;
      result.set_verdict(verdict);
      ASSERT_TRUE(pool.Complete("w", (*leased)[0].lease_id(), (*leased)[0].task_id(),
                                result.SerializeAsString()));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_TRUE((*store)->Get("task/" + MakeTask("pass").task_id())->has_value());
  EXPECT_FALSE((*store)->Get("task/" + MakeTask("mismatch").task_id())->has_value());
}

TEST(TaskPoolTest, ShutdownCancelsWaitersAndLaterSubmits) {
  TaskPool pool;
  Waiter waiter, late;
  pool.Submit(MakeTask("never"), "sm_90", waiter.callback());
  pool.Shutdown();
  EXPECT_TRUE(absl::IsCancelled(waiter.Get()->status()));
  pool.Submit(MakeTask("later"), "sm_90", late.callback());
  EXPECT_TRUE(absl::IsCancelled(late.Get(0)->status()));
}

TEST(TaskPoolTest, InvalidTasksFailThroughTheCallback) {
  Waiter waiter;
  TaskPool pool;
  v1::Task task = MakeTask("no-arch");
  pool.Submit(task, "", waiter.callback());  // an evaluate task needs an arch
  EXPECT_TRUE(absl::IsInvalidArgument(waiter.Get(0)->status()));
}

// The runner turns a candidate into a compile task and, once compiled, an evaluate task.
class PoolRunnerTest : public ::testing::Test {
 protected:
  PoolRunnerTest() : runner_(pool_, Options()) {}
  static PoolRunnerOptions Options() {
    PoolRunnerOptions options;
    options.compile.set_arch("sm_90");
    options.policy.set_version("test-policy");
    return options;
  }
  // Serves one task as a worker would; returns its kind.
  v1::TaskKind Serve(const std::function<std::string(const v1::Task&)>& answer) {
    absl::StatusOr<std::vector<v1::Task>> tasks = pool_.Lease(Worker("w", "sm_90"), 1, 5);
    if (!tasks.ok() || tasks->empty()) return v1::TASK_KIND_UNSPECIFIED;
    const v1::Task& task = (*tasks)[0];
    pool_.Complete("w", task.lease_id(), task.task_id(), answer(task));
    return task.kind();
  }
  static v1::Candidate Candidate(const std::string& id) {
    v1::Candidate c;
    c.set_id(id);
    c.set_source("extern \"C\" __global__ void k() {}");
    c.set_launch_plan_json("{}");
    return c;
  }

  TaskPool pool_;
  PoolCandidateRunner runner_;
};

TEST_F(PoolRunnerTest, CompilesThenEvaluatesOnTheJobsArch) {
  std::promise<absl::StatusOr<RunOutcome>> done;
  v1::Target target;
  target.set_id("t");
  runner_.Run(target, Candidate("c1"), RunOptions{.fresh_process = true},
              [&](absl::StatusOr<RunOutcome> o) { done.set_value(std::move(o)); });
  EXPECT_EQ(runner_.in_flight(), 1);
  EXPECT_EQ(Serve([](const v1::Task& task) {
              v1::CompileRequest request;
              EXPECT_TRUE(request.ParseFromString(task.request()));
              EXPECT_EQ(request.options().arch(), "sm_90");
              v1::CompileResult result;
              result.set_status(v1::COMPILE_OK);
              return result.SerializeAsString();
            }),
            v1::TASK_COMPILE);
  EXPECT_EQ(Serve([](const v1::Task& task) {
              v1::EvaluateRequest request;
              EXPECT_TRUE(request.ParseFromString(task.request()));
              EXPECT_TRUE(request.fresh_process());
              EXPECT_EQ(request.policy().version(), "test-policy");
              EXPECT_EQ(request.target().id(), "t");
              v1::EvaluationResult result;
              result.set_verdict(v1::PASS);
              result.set_speedup(2.0);
              return result.SerializeAsString();
            }),
            v1::TASK_EVALUATE);
  absl::StatusOr<RunOutcome> outcome = done.get_future().get();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->compile.status(), v1::COMPILE_OK);
  EXPECT_EQ(outcome->evaluation.verdict(), v1::PASS);
  EXPECT_EQ(runner_.in_flight(), 0);
}

TEST_F(PoolRunnerTest, AFailedCompileIsNotEvaluated) {
  std::promise<absl::StatusOr<RunOutcome>> done;
  runner_.Run(v1::Target(), Candidate("c2"), RunOptions{},
              [&](absl::StatusOr<RunOutcome> o) { done.set_value(std::move(o)); });
  Serve([](const v1::Task&) {
    v1::CompileResult result;
    result.set_status(v1::COMPILE_FAILED);
    result.set_log("error: expected ';'");
    return result.SerializeAsString();
  });
  absl::StatusOr<RunOutcome> outcome = done.get_future().get();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(EffectiveVerdict(*outcome), v1::COMPILE_ERROR);
  EXPECT_EQ(pool_.Stats().table.queued, 0);  // no evaluate task
}

TEST_F(PoolRunnerTest, ShutdownIsTheRunnersFailureNotTheCandidates) {
  std::promise<absl::StatusOr<RunOutcome>> done;
  runner_.Run(v1::Target(), Candidate("c3"), RunOptions{},
              [&](absl::StatusOr<RunOutcome> o) { done.set_value(std::move(o)); });
  pool_.Shutdown();
  EXPECT_TRUE(absl::IsCancelled(done.get_future().get().status()));
}

}  // namespace
}  // namespace kforge
