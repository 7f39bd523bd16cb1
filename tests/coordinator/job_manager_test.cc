// JobManager in process, over a real TaskPool and a local-directory store: spec validation,
// target selection (refusals), the job life cycle, waiting for a worker of the arch, cancel,
// and resume after a restart with no lost node and the same search as an uninterrupted run.
// Stand-ins (no GPU, no LibTorch here): the capture is a function returning a fixed profile,
// the proposer is the search tests' grid proposer, and the workers are threads that answer
// compile tasks with COMPILE_OK and evaluate tasks with the test-only SimulatedEvaluator.
#include "services/coordinator/service/job_manager.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "services/coordinator/pool/simulated_pool_workers.h"
#include "services/coordinator/pool/task_pool.h"
#include "tests/search/search_test_doubles.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

bool WaitFor(const std::function<bool()>& condition, double timeout_s = 30) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1e3));
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

v1::Target MakeTarget(const std::string& op, double share) {
  v1::Target t;
  t.set_id(Sha256Hex("target " + op));
  t.add_nodes()->set_op(op);
  v1::TensorSignature* input = t.add_inputs();
  input->add_sizes(64);
  input->add_sizes(512);
  input->set_dtype(v1::FLOAT32);
  input->set_device("cpu");  // captured on the CPU: the job describes it on CUDA
  t.set_share(share);
  t.set_eager_time_s(1e-4);
  t.mutable_captured_inputs()->set_sha256(Sha256Hex("inputs " + op));
  return t;
}

v1::OperatorProfile Profile() {
  v1::OperatorProfile profile;
  *profile.add_targets() = MakeTarget("aten::softmax", 0.5);
  *profile.add_targets() = MakeTarget("aten::mm", 0.3);
  *profile.add_targets() = MakeTarget("aten::relu", 0.2);
  return profile;
}

// The grid proposer (search_test_doubles.h), refusing matrix multiplies as the synthesizer
// does.
class RefusingGridProposer : public Proposer {
 public:
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override {
    if (request.target().nodes(0).op() == "aten::mm") {
      v1::ProposeResponse response;
      response.set_refusal("no synthesizer family covers aten::mm");
      return response;
    }
    return grid_.Propose(request);
  }
  std::string Name() const override { return "synth"; }

 private:
  testing::GridProposerForTests grid_;
};


class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + dir_.str());
    ASSERT_TRUE(store.ok());
    store_ = *std::move(store);
    model_ = *PutBlob(*store_, "model bytes");
    inputs_ = *PutBlob(*store_, "inputs bytes");
    Restart();
  }
  void TearDown() override { Stop(); }

  // A coordinator (pool + manager) over the same store, as after a process restart.
  void Restart(CaptureFunction capture = nullptr) {
    Stop();
    TaskPoolOptions options;
    options.lapse_interval_s = 0.05;
    pool_ = std::make_unique<TaskPool>(options, store_.get());
    JobManagerOptions job_options;
    job_options.monitor_interval_s = 0.05;
    job_options.max_in_flight = 3;
    if (!capture) {
      capture = [this](const v1::CaptureRequest& request) -> absl::StatusOr<v1::OperatorProfile> {
        ++captures_;
        EXPECT_EQ(request.model().sha256(), model_.sha256());
        return Profile();
      };
    }
    jobs_ = std::make_unique<JobManager>(*store_, *pool_, proposer_, std::move(capture),
                                         job_options, nullptr);
    ASSERT_TRUE(jobs_->Start().ok());
  }
  void Stop() {
    workers_.reset();
    if (jobs_) jobs_->Shutdown();
    jobs_.reset();
    pool_.reset();
  }
  void StartWorkers(int count, double eval_s = 0, const std::string& arch = "sm_90") {
    workers_ = std::make_unique<SimulatedPoolWorkers>(*pool_, count, arch, eval_s, "sim-", 0.05);
  }

  v1::JobSpec Spec(int iterations = 4, uint64_t seed = 1) const {
    v1::JobSpec spec;
    *spec.mutable_model() = model_;
    *spec.mutable_inputs() = inputs_;
    spec.set_top_k(2);
    spec.mutable_budget()->set_iterations_per_target(iterations);
    spec.set_seed(seed);
    spec.set_device("cpu");
    return spec;
  }

  v1::Job WaitEnded(const std::string& id) {
    v1::Job job;
    EXPECT_TRUE(WaitFor([&] {
      job = *jobs_->Get(id);
      return job.state() == v1::JOB_DONE || job.state() == v1::JOB_FAILED ||
             job.state() == v1::JOB_CANCELLED;
    })) << job.message();
    return job;
  }

  std::map<std::string, std::vector<v1::SearchNode>> Trees(const v1::Job& job) {
    std::map<std::string, std::vector<v1::SearchNode>> trees;
    for (const v1::TargetProgress& t : job.targets()) {
      absl::StatusOr<std::vector<v1::SearchNode>> nodes = jobs_->GetTree(job.id(), t.target().id());
      if (nodes.ok()) trees[t.target().id()] = *nodes;
    }
    return trees;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  v1::Digest model_, inputs_;
  RefusingGridProposer proposer_;
  std::atomic<int> captures_{0};
  std::unique_ptr<TaskPool> pool_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<SimulatedPoolWorkers> workers_;
};

TEST_F(JobManagerTest, SubmitRefusesBadSpecsNamingTheField) {
  struct Case {
    std::function<void(v1::JobSpec&)> edit;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::JobSpec& s) { s.clear_model(); }, absl::StatusCode::kInvalidArgument,
       "JobSpec.model is empty"},
      {[](v1::JobSpec& s) { s.mutable_inputs()->set_sha256(std::string(64, 'e')); },
       absl::StatusCode::kNotFound, "JobSpec.inputs names artifact eeee"},
      {[](v1::JobSpec& s) { s.mutable_budget()->set_iterations_per_target(0); },
       absl::StatusCode::kInvalidArgument, "iterations_per_target is 0"},
      {[](v1::JobSpec& s) { s.mutable_budget()->set_iterations_per_target(1 << 30); },
       absl::StatusCode::kInvalidArgument, "must be between 1 and 100000"},
      {[](v1::JobSpec& s) { s.mutable_budget()->set_time_budget_s(-1); },
       absl::StatusCode::kInvalidArgument, "time_budget_s is -1"},
      {[](v1::JobSpec& s) { s.mutable_budget()->set_time_budget_s(1e12); },
       absl::StatusCode::kInvalidArgument, "time_budget_s"},
      {[](v1::JobSpec& s) { s.set_top_k(1000); }, absl::StatusCode::kInvalidArgument,
       "JobSpec.top_k is 1000"},
      {[](v1::JobSpec& s) {
         s.add_target_ids("a");
         s.add_target_ids("a");
       },
       absl::StatusCode::kInvalidArgument, "lists a target twice"},
      {[](v1::JobSpec& s) { s.set_proposer("gpt"); }, absl::StatusCode::kInvalidArgument,
       "proposer 'gpt' is unknown"},
      {[](v1::JobSpec& s) { s.set_device("tpu"); }, absl::StatusCode::kInvalidArgument,
       "device 'tpu' is unknown"},
      {[](v1::JobSpec& s) { s.set_arch("hopper"); }, absl::StatusCode::kInvalidArgument,
       "arch 'hopper' is not a GPU arch"},
      {[](v1::JobSpec& s) { s.mutable_policy()->set_version("v"); },
       absl::StatusCode::kInvalidArgument, "random_input_sets is 0"},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = Spec();
    c.edit(spec);
    absl::StatusOr<std::string> id = jobs_->Submit(spec);
    ASSERT_FALSE(id.ok()) << c.message;
    EXPECT_EQ(id.status().code(), c.code) << id.status();
    EXPECT_TRUE(absl::StrContains(id.status().message(), c.message)) << id.status();
  }
  EXPECT_TRUE(jobs_->List().empty());  // nothing half-made was kept
}

TEST_F(JobManagerTest, JobRunsToTheEndAndSkipsTargetsTheProposerRefuses) {
  StartWorkers(2);
  absl::StatusOr<std::string> id = jobs_->Submit(Spec(4));
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Job job = WaitEnded(*id);
  ASSERT_EQ(job.state(), v1::JOB_DONE) << job.error();
  ASSERT_EQ(job.targets_size(), 2);
  EXPECT_EQ(job.targets(0).target().nodes(0).op(), "aten::softmax");
  EXPECT_EQ(job.targets(1).target().nodes(0).op(), "aten::relu");  // mm was skipped
  EXPECT_EQ(job.targets(0).target().inputs(0).device(), "cuda:0");
  EXPECT_EQ(job.gpu().name(), "Simulated GPU (test-only)");
  for (const v1::TargetProgress& t : job.targets()) {
    EXPECT_EQ(t.iterations(), 4);
    EXPECT_GT(t.best_speedup(), 0);
    EXPECT_TRUE(t.best().reconfirmed());
  }
  absl::StatusOr<JobEvents> events = jobs_->WaitEvents(*id, 0, 0);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->finished);
  bool skipped = false;
  for (const v1::JobEvent& e : events->events) {
    skipped = skipped || absl::StrContains(e.message(), "skipped aten::mm");
  }
  EXPECT_TRUE(skipped);
  // Trees, the candidates in them, and the one-target shortcut that needs one target.
  std::map<std::string, std::vector<v1::SearchNode>> trees = Trees(job);
  ASSERT_EQ(trees.size(), 2u);
  for (const auto& [target, nodes] : trees) {
    EXPECT_EQ(nodes.size(), 4u);
    absl::StatusOr<v1::EvaluatedCandidate> candidate = jobs_->GetCandidate(nodes[0].candidate_id());
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    EXPECT_EQ(candidate->candidate().id(), nodes[0].candidate_id());
  }
  EXPECT_TRUE(absl::IsInvalidArgument(jobs_->GetTree(*id, "").status()));
  EXPECT_TRUE(absl::IsNotFound(jobs_->GetCandidate("nope").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(jobs_->Cancel(*id)));
  // A second job of the same model reuses the capture.
  ASSERT_TRUE(jobs_->Submit(Spec(1, 2)).ok());
  EXPECT_TRUE(WaitFor([&] { return jobs_->List().front().state() == v1::JOB_DONE; }));
  EXPECT_EQ(captures_.load(), 1);
}

TEST_F(JobManagerTest, TargetsThatCannotBeSearchedFailTheJobWithTheReason) {
  StartWorkers(1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {MakeTarget("aten::mm", 0).id(), "no synthesizer family covers aten::mm"},
      {std::string(64, '0'), "is not among the 3 targets captured"},
  };
  for (const auto& [target, reason] : cases) {
    v1::JobSpec spec = Spec();
    spec.add_target_ids(target);
    absl::StatusOr<std::string> id = jobs_->Submit(spec);
    ASSERT_TRUE(id.ok());
    v1::Job job = WaitEnded(*id);
    EXPECT_EQ(job.state(), v1::JOB_FAILED);
    EXPECT_TRUE(absl::StrContains(job.error(), reason)) << job.error();
  }
  // A capture that fails, and a coordinator without a capture service.
  Restart([](const v1::CaptureRequest&) -> absl::StatusOr<v1::OperatorProfile> {
    return absl::InvalidArgumentError("not a TorchScript archive");
  });
  v1::Job failed = WaitEnded(*jobs_->Submit(Spec()));
  EXPECT_TRUE(absl::StrContains(failed.error(), "capture failed: not a TorchScript archive"))
      << failed.error();
}

TEST_F(JobManagerTest, AJobWithNoWorkerForItsArchWaitsSaysSoAndCanBeCancelled) {
  StartWorkers(1, 0, "sm_80");
  absl::StatusOr<std::string> id = jobs_->Submit(Spec());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(jobs_->Get(*id)->message(),
                             "waiting: no worker with a GPU of arch sm_90");
  }));
  EXPECT_EQ(jobs_->Get(*id)->state(), v1::JOB_SEARCHING);
  ASSERT_TRUE(jobs_->Cancel(*id).ok());
  EXPECT_EQ(WaitEnded(*id).state(), v1::JOB_CANCELLED);
}

TEST_F(JobManagerTest, RestartResumesWithoutLosingNodesAndSearchesAsIfUninterrupted) {
  StartWorkers(2, 0.01);
  absl::StatusOr<std::string> id = jobs_->Submit(Spec(10, 7));
  ASSERT_TRUE(id.ok());
  std::map<std::string, std::set<std::string>> before;
  int completed_before = 0;
  ASSERT_TRUE(WaitFor([&] {
    v1::Job job = *jobs_->Get(*id);
    before.clear();
    for (const auto& [target, tree] : Trees(job)) {
      for (const v1::SearchNode& n : tree) before[target].insert(n.candidate_id());
    }
    completed_before = 0;
    for (const v1::TargetProgress& t : job.targets()) completed_before += t.iterations();
    return completed_before >= 4;
  }));
  Restart();  // the old coordinator's state is gone; only the store remains
  // Interrupted mid-search: without workers it cannot finish, and it says it resumed.
  EXPECT_EQ(jobs_->Get(*id)->state(), v1::JOB_SEARCHING);
  EXPECT_EQ(jobs_->WaitEvents(*id, 0, 0)->events.at(0).message(),
            "resumed after a coordinator restart (was searching)");
  StartWorkers(2);
  EXPECT_EQ(jobs_->List().size(), 1u);
  v1::Job resumed = WaitEnded(*id);
  ASSERT_EQ(resumed.state(), v1::JOB_DONE) << resumed.error();
  // It went on from its checkpoints rather than starting over (which, the search being
  // deterministic, would regrow the same trees): the first iteration after the restart
  // counts on from what was finished before.
  absl::StatusOr<JobEvents> history = jobs_->WaitEvents(*id, 0, 0);
  ASSERT_TRUE(history.ok());
  for (const v1::JobEvent& e : history->events) {
    if (e.kind() != "iteration") continue;
    int completed = 0;
    for (const v1::TargetProgress& t : e.job().targets()) completed += t.iterations();
    EXPECT_GT(completed, completed_before);
    break;
  }
  std::map<std::string, std::vector<v1::SearchNode>> after = Trees(resumed);
  for (const auto& [target, ids] : before) {
    std::set<std::string> now;
    for (const v1::SearchNode& n : after[target]) now.insert(n.candidate_id());
    for (const std::string& candidate : ids) {
      EXPECT_TRUE(now.contains(candidate)) << "lost node " << candidate;
    }
    EXPECT_EQ(after[target].size(), 10u);
  }
  // The same seed from scratch: the same trees, node for node.
  v1::Job fresh = WaitEnded(*jobs_->Submit(Spec(10, 7)));
  ASSERT_EQ(fresh.state(), v1::JOB_DONE);
  std::map<std::string, std::vector<v1::SearchNode>> again = Trees(fresh);
  ASSERT_EQ(again.size(), after.size());
  for (const auto& [target, nodes] : again) {
    ASSERT_EQ(nodes.size(), after[target].size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(nodes[i].candidate_id(), after[target][i].candidate_id()) << i;
      EXPECT_EQ(nodes[i].parent_id(), after[target][i].parent_id()) << i;
      EXPECT_EQ(nodes[i].visits(), after[target][i].visits()) << i;
    }
  }
  for (int i = 0; i < fresh.targets_size(); ++i) {
    EXPECT_EQ(fresh.targets(i).best_candidate_id(), resumed.targets(i).best_candidate_id());
  }
}

}  // namespace
}  // namespace kforge
