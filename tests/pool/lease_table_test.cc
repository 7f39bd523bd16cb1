// LeaseTable tests: arch routing, backpressure, heartbeats, lapses, retry cap, merging,
// stale and repeated completions, FIFO order and concurrent leasing. Time is a test clock.
#include "services/coordinator/pool/lease_table.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

// A clock the test advances by hand; atomic so worker threads may read it.
class TestClock {
 public:
  double Now() const { return now_.load(); }
  void Advance(double seconds) { now_.store(now_.load() + seconds); }
  LeaseTable::Clock AsClock() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<double> now_{1'000'000.0};
};

v1::Task MakeTask(const std::string& id, v1::TaskKind kind) {
  v1::Task task;
  task.set_task_id(id);
  task.set_kind(kind);
  task.set_request("request-of-" + id);
  return task;
}

v1::WorkerInfo GpuWorker(const std::string& id, const std::string& arch, int max_outstanding = 0) {
  v1::WorkerInfo worker;
  worker.set_worker_id(id);
  worker.set_state(v1::WORKER_IDLE);
  worker.set_max_outstanding(max_outstanding);
  v1::GpuInfo* gpu = worker.add_gpus();
  gpu->set_name("test gpu");
  gpu->set_arch(arch);
  return worker;
}

v1::WorkerInfo CpuWorker(const std::string& id, int max_outstanding = 0) {
  v1::WorkerInfo worker;
  worker.set_worker_id(id);
  worker.set_state(v1::WORKER_IDLE);
  worker.set_max_outstanding(max_outstanding);
  return worker;
}

std::vector<std::string> Ids(const std::vector<v1::Task>& tasks) {
  std::vector<std::string> ids;
  for (const v1::Task& task : tasks) ids.push_back(task.task_id());
  return ids;
}

class LeaseTableTest : public ::testing::Test {
 protected:
  LeaseTableOptions options_;  // defaults: 30 s leases, 3 attempts, 2 outstanding
  TestClock clock_;
  LeaseTable table_{options_, clock_.AsClock()};

  void EnqueueOk(const std::string& id, v1::TaskKind kind, const std::string& arch = "sm_90") {
    absl::StatusOr<TaskStatus> status = table_.Enqueue(MakeTask(id, kind), arch);
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_FALSE(status->merged) << id;
  }
  std::vector<v1::Task> LeaseOk(const v1::WorkerInfo& worker, int max_tasks) {
    absl::StatusOr<std::vector<v1::Task>> tasks = table_.Lease(worker, max_tasks);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? *tasks : std::vector<v1::Task>{};
  }
};

TEST_F(LeaseTableTest, RejectsMalformedTasksAndWorkers) {
  EXPECT_EQ(table_.Enqueue(MakeTask("", v1::TASK_COMPILE), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Enqueue(MakeTask("a", v1::TASK_KIND_UNSPECIFIED), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Enqueue(MakeTask("b", v1::TASK_EVALUATE), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Lease(CpuWorker(""), 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Result("a").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LeaseTableTest, EvaluateTasksGoOnlyToWorkersOfTheirArchCompileTasksToAnyone) {
  EnqueueOk("eval-90", v1::TASK_EVALUATE, "sm_90");
  EnqueueOk("eval-80", v1::TASK_EVALUATE, "sm_80");
  EnqueueOk("compile", v1::TASK_COMPILE, "");

  // A GPU-less worker skips both evaluations and gets only the compile task.
  EXPECT_EQ(Ids(LeaseOk(CpuWorker("cpu", 10), 10)), std::vector<std::string>{"compile"});
  EXPECT_EQ(Ids(LeaseOk(GpuWorker("h200", "sm_90", 10), 10)), std::vector<std::string>{"eval-90"});
  EXPECT_EQ(Ids(LeaseOk(GpuWorker("a100", "sm_80", 10), 10)), std::vector<std::string>{"eval-80"});
  EXPECT_EQ(table_.Stats().queued, 0);
  EXPECT_EQ(table_.Stats().leased, 3);
}

TEST_F(LeaseTableTest, LeaseFillsLeaseFields) {
  EnqueueOk("t", v1::TASK_COMPILE);
  std::vector<v1::Task> tasks = LeaseOk(CpuWorker("w"), 1);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_FALSE(tasks[0].lease_id().empty());
  EXPECT_DOUBLE_EQ(tasks[0].lease_expiry_unix_s(), clock_.Now() + 30.0);
  EXPECT_EQ(tasks[0].attempt(), 1);
  EXPECT_EQ(tasks[0].request(), "request-of-t");
  EXPECT_EQ(table_.Result("t")->state, TaskState::kLeased);
}

TEST_F(LeaseTableTest, BackpressureCapsOutstandingPerWorker) {
  for (int i = 0; i < 6; ++i) EnqueueOk(absl::StrCat("t", i), v1::TASK_COMPILE);

  // Default cap of 2 when the worker reports max_outstanding 0.
  std::vector<v1::Task> first = LeaseOk(CpuWorker("w"), 5);
  EXPECT_EQ(first.size(), 2u);
  EXPECT_TRUE(LeaseOk(CpuWorker("w"), 5).empty());

  // Completing one frees one slot.
  ASSERT_TRUE(table_.Complete("w", first[0].lease_id(), first[0].task_id(), "done"));
  EXPECT_EQ(LeaseOk(CpuWorker("w"), 5).size(), 1u);

  // A worker's own cap, and max_tasks, both bound the grant.
  EXPECT_EQ(LeaseOk(CpuWorker("big", 3), 1).size(), 1u);
  EXPECT_EQ(LeaseOk(CpuWorker("big", 3), 5).size(), 2u);
  EXPECT_EQ(table_.Stats().queued, 0);
}

TEST_F(LeaseTableTest, DrainingWorkerGetsNothing) {
  EnqueueOk("t", v1::TASK_COMPILE);
  v1::WorkerInfo worker = CpuWorker("w");
  worker.set_state(v1::WORKER_DRAINING);
  EXPECT_TRUE(LeaseOk(worker, 1).empty());
  EXPECT_EQ(table_.Stats().workers_by_state[v1::WORKER_DRAINING], 1);
}

TEST_F(LeaseTableTest, LeasesAreFifoAmongEligibleTasks) {
  EnqueueOk("a", v1::TASK_COMPILE);
  EnqueueOk("eval", v1::TASK_EVALUATE, "sm_90");
  EnqueueOk("b", v1::TASK_COMPILE);
  EnqueueOk("c", v1::TASK_COMPILE);
  EXPECT_EQ(Ids(LeaseOk(CpuWorker("w1"), 2)), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Ids(LeaseOk(GpuWorker("w2", "sm_90"), 2)), (std::vector<std::string>{"eval", "c"}));
}

TEST_F(LeaseTableTest, HeartbeatExtendsLeasesAndReportsExpiredOnes) {
  EnqueueOk("a", v1::TASK_COMPILE);
  EnqueueOk("b", v1::TASK_COMPILE);
  std::vector<v1::Task> tasks = LeaseOk(CpuWorker("w"), 2);
  ASSERT_EQ(tasks.size(), 2u);
  const std::string kept = tasks[0].lease_id();
  const std::string dropped = tasks[1].lease_id();

  // Heartbeat only `kept` every 20 s: it outlives the 30 s lease; `dropped` lapses.
  clock_.Advance(20);
  EXPECT_TRUE(table_.Heartbeat("w", {kept}).empty());
  clock_.Advance(20);
  EXPECT_EQ(table_.Heartbeat("w", {kept, dropped}), std::vector<std::string>{dropped});
  clock_.Advance(20);
  EXPECT_TRUE(table_.Heartbeat("w", {kept}).empty());
  EXPECT_EQ(table_.Result("a")->state, TaskState::kLeased);
  EXPECT_EQ(table_.Result("b")->state, TaskState::kQueued);
  EXPECT_EQ(table_.Stats().lease_expiries_total, 1);

  // Another worker cannot keep (or learn it may keep) a lease it does not hold.
  EXPECT_EQ(table_.Heartbeat("other", {kept}), std::vector<std::string>{kept});
  EXPECT_EQ(table_.Heartbeat("w", {"no-such-lease"}), std::vector<std::string>{"no-such-lease"});

  // Once the heartbeats stop, the lease lapses too.
  clock_.Advance(31);
  EXPECT_EQ(table_.Heartbeat("w", {kept}), std::vector<std::string>{kept});
}

TEST_F(LeaseTableTest, LapsedLeaseRequeuesAtTheFrontForAnotherWorker) {
  EnqueueOk("first", v1::TASK_COMPILE);
  EnqueueOk("second", v1::TASK_COMPILE);
  std::vector<v1::Task> lost = LeaseOk(CpuWorker("crashed", 1), 1);
  ASSERT_EQ(Ids(lost), std::vector<std::string>{"first"});

  clock_.Advance(29.9);
  EXPECT_EQ(table_.ExpireLapsed(), 0);
  clock_.Advance(0.2);
  EXPECT_EQ(table_.ExpireLapsed(), 1);
  EXPECT_EQ(table_.Result("first")->state, TaskState::kQueued);

  // It goes back ahead of "second", to a different worker, as attempt 2 with a new lease.
  std::vector<v1::Task> again = LeaseOk(CpuWorker("healthy", 1), 1);
  ASSERT_EQ(Ids(again), std::vector<std::string>{"first"});
  EXPECT_EQ(again[0].attempt(), 2);
  EXPECT_NE(again[0].lease_id(), lost[0].lease_id());
  EXPECT_EQ(table_.Stats().lease_expiries_total, 1);
}

TEST_F(LeaseTableTest, RetryCapMarksThePoisonousTaskFailed) {
  EnqueueOk("poison", v1::TASK_EVALUATE, "sm_90");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<v1::Task> tasks = LeaseOk(GpuWorker(absl::StrCat("w", attempt), "sm_90"), 1);
    ASSERT_EQ(tasks.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(tasks[0].attempt(), attempt);
    clock_.Advance(31);
    EXPECT_EQ(table_.ExpireLapsed(), 1);
  }
  absl::StatusOr<TaskStatus> status = table_.Result("poison");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, TaskState::kFailed);
  EXPECT_EQ(status->attempts, 3);
  EXPECT_EQ(status->error,
            "lease lapsed 3 times; the candidate is marked failed so a poisonous kernel cannot "
            "crash-loop the pool");
  EXPECT_TRUE(LeaseOk(GpuWorker("w4", "sm_90"), 1).empty());
  EXPECT_EQ(table_.Stats().failed, 1);
  EXPECT_EQ(table_.Stats().queued, 0);

  // Enqueuing it again merges with the failure instead of starting a new crash loop.
  absl::StatusOr<TaskStatus> again = table_.Enqueue(MakeTask("poison", v1::TASK_EVALUATE), "sm_90");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->merged);
  EXPECT_EQ(again->state, TaskState::kFailed);
}

TEST_F(LeaseTableTest, DuplicateEnqueueMergesInFlightAndAfterCompletion) {
  EnqueueOk("t", v1::TASK_COMPILE);
  absl::StatusOr<TaskStatus> queued = table_.Enqueue(MakeTask("t", v1::TASK_COMPILE), "");
  ASSERT_TRUE(queued.ok());
  EXPECT_TRUE(queued->merged);
  EXPECT_EQ(queued->state, TaskState::kQueued);
  EXPECT_EQ(table_.Stats().queued, 1);

  std::vector<v1::Task> tasks = LeaseOk(CpuWorker("w"), 2);
  ASSERT_EQ(tasks.size(), 1u);
  absl::StatusOr<TaskStatus> leased = table_.Enqueue(MakeTask("t", v1::TASK_COMPILE), "");
  ASSERT_TRUE(leased.ok());
  EXPECT_TRUE(leased->merged);
  EXPECT_EQ(leased->state, TaskState::kLeased);
  EXPECT_TRUE(LeaseOk(CpuWorker("w2"), 2).empty()) << "the merged duplicate must not be queued";

  ASSERT_TRUE(table_.Complete("w", tasks[0].lease_id(), "t", "result-bytes"));
  absl::StatusOr<TaskStatus> done = table_.Enqueue(MakeTask("t", v1::TASK_COMPILE), "");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->merged);
  EXPECT_EQ(done->state, TaskState::kCompleted);
  EXPECT_EQ(done->result, "result-bytes");
  EXPECT_EQ(table_.Stats().queued, 0);
  EXPECT_EQ(table_.Stats().merged_enqueues_total, 3);
}

TEST_F(LeaseTableTest, LateCompletionAfterReleaseElsewhereIsRejected) {
  EnqueueOk("t", v1::TASK_EVALUATE, "sm_90");
  std::vector<v1::Task> slow = LeaseOk(GpuWorker("slow", "sm_90"), 1);
  ASSERT_EQ(slow.size(), 1u);
  clock_.Advance(31);
  std::vector<v1::Task> fast = LeaseOk(GpuWorker("fast", "sm_90"), 1);
  ASSERT_EQ(fast.size(), 1u);

  EXPECT_FALSE(table_.Complete("slow", slow[0].lease_id(), "t", "stale"));
  // Nor may a worker complete with a lease that is not its own, or on another task.
  EXPECT_FALSE(table_.Complete("slow", fast[0].lease_id(), "t", "stolen"));
  EXPECT_FALSE(table_.Complete("fast", fast[0].lease_id(), "other-task", "x"));
  EXPECT_EQ(table_.Result("t")->state, TaskState::kLeased);

  EXPECT_TRUE(table_.Complete("fast", fast[0].lease_id(), "t", "fresh"));
  EXPECT_EQ(table_.Result("t")->result, "fresh");
}

TEST_F(LeaseTableTest, RepeatedCompletionIsAcceptedButKeepsTheFirstResult) {
  EnqueueOk("t", v1::TASK_COMPILE);
  std::vector<v1::Task> tasks = LeaseOk(CpuWorker("w"), 1);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(table_.Complete("w", tasks[0].lease_id(), "t", "first"));
  EXPECT_TRUE(table_.Complete("w", tasks[0].lease_id(), "t", "second"));
  EXPECT_TRUE(table_.Complete("late", "old-lease", "t", "third"));
  absl::StatusOr<TaskStatus> status = table_.Result("t");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, TaskState::kCompleted);
  EXPECT_EQ(status->result, "first");
  EXPECT_EQ(table_.Stats().completed, 1);
  EXPECT_EQ(table_.Stats().leased, 0);
}

TEST_F(LeaseTableTest, StatsCountWorkersByState) {
  EnqueueOk("t", v1::TASK_COMPILE);
  LeaseOk(CpuWorker("busy"), 1);
  LeaseOk(CpuWorker("idle"), 1);
  LeaseTableStats stats = table_.Stats();
  EXPECT_EQ(stats.workers_by_state[v1::WORKER_BUSY], 1);
  EXPECT_EQ(stats.workers_by_state[v1::WORKER_IDLE], 1);

  // A worker silent for a lease duration, holding nothing, is forgotten; its lapsed lease
  // turns the busy one idle-and-gone too.
  clock_.Advance(31);
  table_.ExpireLapsed();
  stats = table_.Stats();
  EXPECT_EQ(stats.workers_by_state[v1::WORKER_IDLE], 0);
  EXPECT_EQ(stats.workers_by_state[v1::WORKER_BUSY], 0);
}

TEST_F(LeaseTableTest, FinishedTasksBeyondTheRetentionCapAreForgotten) {
  LeaseTableOptions options;
  options.max_finished_retained = 2;
  LeaseTable table(options, clock_.AsClock());
  for (const std::string id : {"a", "b", "c"}) {
    ASSERT_TRUE(table.Enqueue(MakeTask(id, v1::TASK_COMPILE), "").ok());
    absl::StatusOr<std::vector<v1::Task>> tasks = table.Lease(CpuWorker("w"), 1);
    ASSERT_TRUE(tasks.ok() && tasks->size() == 1u);
    ASSERT_TRUE(table.Complete("w", (*tasks)[0].lease_id(), id, "r-" + id));
  }
  EXPECT_EQ(table.Result("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Result("c")->result, "r-c");
}

TEST_F(LeaseTableTest, ConcurrentLeasingNeverHandsOneTaskToTwoWorkers) {
  constexpr int kTasks = 2000;
  constexpr int kWorkers = 8;
  for (int i = 0; i < kTasks; ++i) EnqueueOk(absl::StrCat("t", i), v1::TASK_COMPILE);

  std::mutex grants_mu;
  std::map<std::string, std::vector<std::string>> holders;  // task id -> workers granted it
  std::atomic<int> rejected_completions{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const v1::WorkerInfo worker = CpuWorker(absl::StrCat("w", w), 3);
      while (true) {
        absl::StatusOr<std::vector<v1::Task>> tasks = table_.Lease(worker, 3);
        if (!tasks.ok() || tasks->empty()) return;
        for (const v1::Task& task : *tasks) {
          {
            std::lock_guard<std::mutex> lock(grants_mu);
            holders[task.task_id()].push_back(worker.worker_id());
          }
          if (!table_.Complete(worker.worker_id(), task.lease_id(), task.task_id(),
                               worker.worker_id())) {
            ++rejected_completions;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(rejected_completions.load(), 0);
  ASSERT_EQ(holders.size(), static_cast<size_t>(kTasks));
  for (const auto& [task_id, workers] : holders) {
    ASSERT_EQ(workers.size(), 1u) << task_id << " was leased more than once";
    EXPECT_EQ(table_.Result(task_id)->result, workers[0]) << task_id;
  }
  LeaseTableStats stats = table_.Stats();
  EXPECT_EQ(stats.completed, kTasks);
  EXPECT_EQ(stats.queued, 0);
  EXPECT_EQ(stats.leased, 0);
}

// Workers that sometimes vanish while a clock thread moves time on: every task still ends
// completed or failed, no task is leased more than the retry cap allows, each lease counts as
// one attempt, and a stored result always comes from a worker the task was leased to.
TEST_F(LeaseTableTest, ConcurrentLeasingWithLapsesKeepsEveryTaskConsistent) {
  constexpr int kTasks = 500;
  constexpr int kWorkers = 6;
  for (int i = 0; i < kTasks; ++i) EnqueueOk(absl::StrCat("t", i), v1::TASK_COMPILE);

  std::mutex grants_mu;
  std::map<std::string, std::set<std::string>> holders;  // task id -> workers granted it
  std::map<std::string, int> grants;
  std::atomic<bool> workers_done{false};
  std::thread ticker([&] {
    while (!workers_done.load()) {
      clock_.Advance(7);
      table_.ExpireLapsed();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const v1::WorkerInfo worker = CpuWorker(absl::StrCat("w", w), 2);
      int abandon = w;
      while (true) {
        LeaseTableStats stats = table_.Stats();
        if (stats.queued == 0 && stats.leased == 0) return;
        absl::StatusOr<std::vector<v1::Task>> tasks = table_.Lease(worker, 2);
        if (!tasks.ok()) return;
        for (const v1::Task& task : *tasks) {
          {
            std::lock_guard<std::mutex> lock(grants_mu);
            holders[task.task_id()].insert(worker.worker_id());
            ++grants[task.task_id()];
          }
          // Every third task is abandoned, as by a worker that crashed on it.
          if (++abandon % 3 == 0) continue;
          table_.Complete(worker.worker_id(), task.lease_id(), task.task_id(), worker.worker_id());
        }
        std::this_thread::yield();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  workers_done.store(true);
  ticker.join();

  int finished = 0;
  for (int i = 0; i < kTasks; ++i) {
    const std::string id = absl::StrCat("t", i);
    absl::StatusOr<TaskStatus> status = table_.Result(id);
    ASSERT_TRUE(status.ok()) << id;
    ASSERT_TRUE(status->state == TaskState::kCompleted || status->state == TaskState::kFailed)
        << id << " ended " << TaskStateName(status->state);
    ++finished;
    EXPECT_LE(grants[id], 3) << id;
    EXPECT_EQ(grants[id], status->attempts) << id;
    if (status->state == TaskState::kCompleted) {
      EXPECT_EQ(holders[id].count(status->result), 1u) << id << " result from " << status->result;
    }
  }
  EXPECT_EQ(finished, kTasks);
}

}  // namespace
}  // namespace kforge
