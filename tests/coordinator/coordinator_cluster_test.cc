// The distributed coordinator end to end, as separate processes on loopback: a real
// redis-server, `kforge serve capture|proposer|coordinator|worker` (build/bin/kforge), and the
// clients `kforge submit|watch|jobs`. There is no GPU here, so the workers evaluate with the
// test-only SimulatedEvaluator (--simulated-evaluator: a deterministic function of the kernel's
// parameters); compiles are real NVRTC. The tests share one cluster and run in order:
//   1. a job completes, with every target searched and its winner re-confirmed;
//   2. a worker killed mid-evaluation: its lease lapses, the task is re-queued and done by
//      another worker, the job completes with no duplicate results;
//   3. the coordinator killed mid-job and restarted: the job resumes from Redis and no node
//      it had is lost;
//   4. the same seed gives the same search: a fresh job with the restarted job's seed grows
//      the same trees and picks the same winners;
//   5. bad input: zero and absurd budgets, a missing model file, a target no proposer
//      supports, a target that is not in the model, no worker for the arch (the job waits and
//      says so until cancelled).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/coordinator/cluster.h"

namespace kforge {
namespace {

using cluster_test::Cluster;
using cluster_test::KforgeProcess;
using cluster_test::WaitFor;
using cluster_test::WaitForServer;

double MetricValue(const std::string& metrics, const std::string& name) {
  for (const std::string& line : Lines(metrics)) {
    if (absl::StartsWith(line, name + " ")) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

class CoordinatorClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    cluster_->SetUp();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_->setup_error.empty()) << cluster_->setup_error;
    ASSERT_TRUE(cluster_->coordinator && cluster_->coordinator->running());
  }
  // Watches `job_id` to its end with `kforge watch --json`; returns the JSON lines.
  static std::vector<nlohmann::json> Watch(const std::string& job_id, int* exit_code) {
    CommandResult r = cluster_->Kforge(absl::StrCat("watch ", job_id, " --json"));
    *exit_code = r.exit_code;
    std::vector<nlohmann::json> events;
    for (const std::string& line : Lines(r.out)) {
      events.push_back(nlohmann::json::parse(line, nullptr, false));
    }
    return events;
  }
  // Checks a finished tree: each candidate once, every node evaluated.
  static void ExpectCompleteTree(const std::vector<v1::SearchNode>& nodes, int iterations) {
    std::set<std::string> ids;
    for (const v1::SearchNode& node : nodes) {
      EXPECT_TRUE(ids.insert(node.candidate_id()).second) << "duplicate " << node.candidate_id();
      EXPECT_NE(node.verdict(), v1::VERDICT_UNSPECIFIED) << node.candidate_id();
      EXPECT_NE(node.verdict(), v1::NOT_EVALUATED) << node.candidate_id();
    }
    EXPECT_EQ(static_cast<int>(nodes.size()), iterations);
  }

  static Cluster* cluster_;
};

Cluster* CoordinatorClusterTest::cluster_ = nullptr;

TEST_F(CoordinatorClusterTest, JobCompletes) {
  std::string why;
  const std::string job_id = cluster_->Submit("--top 2 --iterations 4 --seed 1", &why);
  ASSERT_FALSE(job_id.empty()) << why;
  int exit_code = -1;
  std::vector<nlohmann::json> events = Watch(job_id, &exit_code);
  ASSERT_EQ(exit_code, 0) << cluster_->coordinator->Log();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["kind"], "state");  // the history from "queued" on
  EXPECT_EQ(events.front()["state"], "queued");
  const nlohmann::json& last = events.back();
  EXPECT_EQ(last["state"], "done") << last.dump(2);
  // No synthesizer family covers the matmul: when it ranks above a searched target (CPU
  // timings vary), it is skipped and the job says so.
  bool skipped_matmul = false;
  for (const nlohmann::json& e : events) {
    skipped_matmul = skipped_matmul ||
                     (e["kind"] == "log" &&
                      absl::StrContains(e["event"].get<std::string>(), "skipped aten::matmul"));
  }
  absl::StatusOr<v1::OperatorProfile> profile = cluster_->CapturedProfile();
  ASSERT_TRUE(profile.ok()) << profile.status();
  double matmul_share = 0, lowest_searched = 1;
  for (const v1::Target& t : profile->targets()) {
    if (t.nodes(0).op() == "aten::matmul") matmul_share = t.share();
  }

  absl::StatusOr<v1::Job> job = cluster_->Get(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->targets_size(), 2);
  EXPECT_EQ(job->gpu().name(), "Simulated GPU (test-only)");
  for (const v1::TargetProgress& t : job->targets()) {
    lowest_searched = std::min(lowest_searched, t.target().share());
  }
  EXPECT_EQ(skipped_matmul, matmul_share > lowest_searched) << matmul_share;
  for (const v1::TargetProgress& t : job->targets()) {
    EXPECT_NE(t.target().nodes(0).op(), "aten::matmul");
    EXPECT_EQ(t.iterations(), 4) << t.target().id();
    EXPECT_GT(t.best_speedup(), 0) << t.target().id();
    EXPECT_TRUE(t.best().reconfirmed()) << t.target().id();
  }
  for (const auto& [target, nodes] : cluster_->Trees(*job)) ExpectCompleteTree(nodes, 4);

  CommandResult jobs = cluster_->Kforge("jobs --json");
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  nlohmann::json listed = nlohmann::json::parse(jobs.out, nullptr, false);
  ASSERT_TRUE(listed.is_array()) << jobs.out;
  bool found = false;
  for (const nlohmann::json& j : listed) found = found || j["job_id"] == job_id;
  EXPECT_TRUE(found) << jobs.out;

  const std::string metrics = cluster_->Metrics();
  EXPECT_GE(MetricValue(metrics, "kforge_search_iterations_total"), 8) << metrics;
  EXPECT_NE(metrics.find("kforge_pool_queue_depth"), std::string::npos);
  EXPECT_NE(metrics.find("kforge_pool_workers{state=\"idle\"}"), std::string::npos);
  EXPECT_NE(metrics.find("kforge_job_best_speedup{job=\"" + job_id + "\"}"), std::string::npos);
}

TEST_F(CoordinatorClusterTest, KilledWorkerTaskIsRequeued) {
  // Only a worker whose evaluations take 60 s takes work: the first evaluation it leases, it
  // holds until it is killed.
  cluster_->fast_worker->Kill();
  std::unique_ptr<KforgeProcess> slow = cluster_->StartWorker("slow-1", 60, 1);
  const double expiries_before =
      std::max(0.0, MetricValue(cluster_->Metrics(), "kforge_pool_lease_expiries_total"));
  std::string why;
  const std::string job_id = cluster_->Submit("--top 2 --iterations 4 --seed 2", &why);
  ASSERT_FALSE(job_id.empty()) << why;
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(slow->Log(), "evaluating task "); }, 120))
      << slow->Log();
  // The task it holds: "evaluating task <12 hex> (candidate ...".
  const std::string log = slow->Log();
  const size_t at = log.find("evaluating task ") + std::string("evaluating task ").size();
  const std::string task = log.substr(at, 12);
  cluster_->fast_worker = cluster_->StartWorker("fast-2", 0.05, 2);
  slow->Kill();

  int exit_code = -1;
  std::vector<nlohmann::json> events = Watch(job_id, &exit_code);
  ASSERT_EQ(exit_code, 0) << cluster_->coordinator->Log();
  absl::StatusOr<v1::Job> job = cluster_->Get(job_id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_DONE);
  for (const v1::TargetProgress& t : job->targets()) EXPECT_EQ(t.iterations(), 4);
  for (const auto& [target, nodes] : cluster_->Trees(*job)) ExpectCompleteTree(nodes, 4);
  // The lapse was seen, and the task went to the other worker, which completed it.
  EXPECT_TRUE(WaitFor(
      [&] {
        return MetricValue(cluster_->Metrics(), "kforge_pool_lease_expiries_total") >
               expiries_before;
      },
      5));
  const std::string fast = cluster_->fast_worker->Log();
  EXPECT_NE(fast.find("evaluating task " + task), std::string::npos) << task << "\n" << fast;
  EXPECT_NE(fast.find("task " + task + " completed"), std::string::npos) << task;
}

// The restarted job of test 3, compared with a fresh one in test 4.
std::string restarted_job;  // NOLINT

TEST_F(CoordinatorClusterTest, RestartedCoordinatorResumesWithoutLosingNodes) {
  std::string why;
  const std::string job_id = cluster_->Submit("--top 2 --iterations 5 --seed 3", &why);
  ASSERT_FALSE(job_id.empty()) << why;
  // Let it get somewhere, then remember every node it has and how many it finished.
  std::map<std::string, std::set<std::string>> before;
  int completed_before = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Job> job = cluster_->Get(job_id);
        if (!job.ok()) return false;
        before.clear();
        for (const auto& [target, tree] : cluster_->Trees(*job)) {
          for (const v1::SearchNode& node : tree) before[target].insert(node.candidate_id());
        }
        completed_before = 0;
        for (const v1::TargetProgress& t : job->targets()) completed_before += t.iterations();
        return completed_before >= 3;
      },
      60));
  cluster_->coordinator->Kill();
  absl::StatusOr<v1::Job> mid = cluster_->Get(job_id);
  EXPECT_FALSE(mid.ok());  // it is gone
  cluster_->StartCoordinator();
  ASSERT_TRUE(WaitForServer(cluster_->coordinator_address(), 30));

  int exit_code = -1;
  std::vector<nlohmann::json> events = Watch(job_id, &exit_code);
  ASSERT_EQ(exit_code, 0) << cluster_->coordinator->Log();
  EXPECT_NE(cluster_->coordinator->Log().find("resuming job " + job_id), std::string::npos);
  // It went on from its checkpoint rather than starting over: the first iteration after the
  // restart counts on from what was finished before it.
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["event"], "resumed after a coordinator restart (was searching)");
  for (const nlohmann::json& e : events) {
    if (e["kind"] != "iteration") continue;
    int completed = 0;
    for (const nlohmann::json& t : e["targets"]) completed += t["iterations"].get<int>();
    EXPECT_GT(completed, completed_before) << e.dump();
    break;
  }
  absl::StatusOr<v1::Job> job = cluster_->Get(job_id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_DONE);
  std::map<std::string, std::vector<v1::SearchNode>> after = cluster_->Trees(*job);
  ASSERT_EQ(after.size(), 2u);
  for (const auto& [target, nodes] : after) {
    ExpectCompleteTree(nodes, 5);
    std::set<std::string> ids;
    for (const v1::SearchNode& node : nodes) ids.insert(node.candidate_id());
    for (const std::string& id : before[target]) {
      EXPECT_TRUE(ids.contains(id)) << "node " << id << " of target " << target << " was lost";
    }
  }
  restarted_job = job_id;
}

TEST_F(CoordinatorClusterTest, SameSeedGivesTheSameSearch) {
  ASSERT_FALSE(restarted_job.empty()) << "needs RestartedCoordinatorResumesWithoutLosingNodes";
  std::string why;
  const std::string job_id = cluster_->Submit("--top 2 --iterations 5 --seed 3", &why);
  ASSERT_FALSE(job_id.empty()) << why;
  int exit_code = -1;
  Watch(job_id, &exit_code);
  ASSERT_EQ(exit_code, 0);
  absl::StatusOr<v1::Job> fresh = cluster_->Get(job_id);
  absl::StatusOr<v1::Job> resumed = cluster_->Get(restarted_job);
  ASSERT_TRUE(fresh.ok() && resumed.ok());
  ASSERT_EQ(fresh->targets_size(), resumed->targets_size());
  for (int i = 0; i < fresh->targets_size(); ++i) {
    EXPECT_EQ(fresh->targets(i).target().id(), resumed->targets(i).target().id());
    EXPECT_EQ(fresh->targets(i).best_candidate_id(), resumed->targets(i).best_candidate_id());
    EXPECT_DOUBLE_EQ(fresh->targets(i).best_speedup(), resumed->targets(i).best_speedup());
  }
  std::map<std::string, std::vector<v1::SearchNode>> a = cluster_->Trees(*fresh);
  std::map<std::string, std::vector<v1::SearchNode>> b = cluster_->Trees(*resumed);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [target, nodes] : a) {
    ASSERT_EQ(nodes.size(), b[target].size()) << target;
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(nodes[i].candidate_id(), b[target][i].candidate_id()) << target << " node " << i;
      EXPECT_EQ(nodes[i].parent_id(), b[target][i].parent_id()) << target << " node " << i;
      EXPECT_EQ(nodes[i].visits(), b[target][i].visits()) << target << " node " << i;
      EXPECT_EQ(nodes[i].verdict(), b[target][i].verdict()) << target << " node " << i;
    }
  }
}

TEST_F(CoordinatorClusterTest, BadInputGetsClearErrors) {
  std::string why;
  // Budgets of zero or absurd size: refused at submit, naming the field.
  EXPECT_TRUE(cluster_->Submit("--iterations 0", &why).empty());
  EXPECT_NE(why.find("exit 2"), std::string::npos) << why;
  EXPECT_NE(why.find("iterations_per_target is 0"), std::string::npos) << why;
  EXPECT_TRUE(cluster_->Submit("--iterations 100000000", &why).empty());
  EXPECT_NE(why.find("iterations_per_target is 100000000"), std::string::npos) << why;
  EXPECT_TRUE(cluster_->Submit("--time-budget -5", &why).empty());
  EXPECT_NE(why.find("time_budget_s"), std::string::npos) << why;
  EXPECT_TRUE(cluster_->Submit("--proposer gpt", &why).empty());
  EXPECT_NE(why.find("proposer 'gpt' is unknown"), std::string::npos) << why;

  // A missing model file.
  CommandResult missing =
      cluster_->Kforge(absl::StrCat("submit ", Quote((cluster_->tmp / "nope.pt").string()),
                                    " --inputs ", Quote(cluster_->inputs)));
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("nope.pt"), std::string::npos) << missing.err;

  // A digest nobody uploaded: NotFound, naming the artifact.
  {
    grpc::ClientContext context;
    v1::SubmitRequest request;
    request.mutable_spec()->mutable_model()->set_sha256(std::string(64, 'a'));
    request.mutable_spec()->mutable_inputs()->set_sha256(std::string(64, 'b'));
    request.mutable_spec()->mutable_budget()->set_iterations_per_target(2);
    v1::SubmitResponse response;
    grpc::Status status = cluster_->Stub()->Submit(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("JobSpec.model names artifact aaaa"), std::string::npos)
        << status.error_message();
  }

  // A target no proposer supports (the matmul; its id from a capture in the store) fails the
  // job with the synthesizer's reason; an id that is not in the model says so.
  std::string matmul;
  absl::StatusOr<v1::OperatorProfile> profile = cluster_->CapturedProfile();
  ASSERT_TRUE(profile.ok()) << profile.status();
  for (const v1::Target& t : profile->targets()) {
    if (t.nodes(0).op() == "aten::matmul") matmul = t.id();
  }
  ASSERT_FALSE(matmul.empty());
  for (const auto& [target, expected] :
       {std::pair{matmul, std::string("cannot be searched with proposer synth")},
        std::pair{std::string(64, 'f'), std::string("is not among the")}}) {
    const std::string job_id =
        cluster_->Submit(absl::StrCat("--iterations 2 --target ", target), &why);
    ASSERT_FALSE(job_id.empty()) << why;
    int exit_code = -1;
    Watch(job_id, &exit_code);
    EXPECT_EQ(exit_code, 1);
    absl::StatusOr<v1::Job> job = cluster_->Get(job_id);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state(), v1::JOB_FAILED);
    EXPECT_NE(job->error().find(expected), std::string::npos) << job->error();
  }

  // No worker for the arch: the job waits and says so, and can be cancelled.
  const std::string waiting = cluster_->Submit("--top 1 --iterations 2 --arch sm_80", &why);
  ASSERT_FALSE(waiting.empty()) << why;
  EXPECT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Job> job = cluster_->Get(waiting);
        return job.ok() && absl::StrContains(job->message(), "no worker with a GPU of arch sm_80");
      },
      30));
  {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(waiting);
    v1::CancelJobResponse response;
    EXPECT_TRUE(cluster_->Stub()->Cancel(&context, request, &response).ok());
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Job> job = cluster_->Get(waiting);
        return job.ok() && job->state() == v1::JOB_CANCELLED;
      },
      10));
}

}  // namespace
}  // namespace kforge
