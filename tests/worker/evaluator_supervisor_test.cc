// The Evaluator supervisor with real child processes: the real kforge-evaluator on a machine
// without a GPU (NOT_EVALUATED, cleanly), and fake-evaluator-child, a test double of a
// misbehaving kernel (hang -> TIMEOUT, crash -> CRASH, restart, and the next request passes).
#include "services/worker/evaluator.h"

#include <dlfcn.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

v1::CompileResult CompiledOk() {
  v1::CompileResult compiled;
  compiled.set_status(v1::COMPILE_OK);
  compiled.set_cubin("not a real cubin: the fake child never loads it");
  return compiled;
}

v1::EvaluateRequest Request(const std::string& behaviour, double time_limit_s = 30) {
  v1::EvaluateRequest request;
  request.mutable_candidate()->set_source("// fake:" + behaviour);
  *request.mutable_policy() = DefaultValidationPolicy();
  request.mutable_policy()->set_time_limit_s(time_limit_s);
  return request;
}

std::string PidOf(const v1::EvaluationResult& r) {
  const std::string& m = r.diagnostics().message();
  size_t at = m.find("pid=");
  return at == std::string::npos ? "" : m.substr(at, m.find(' ', at) - at);
}

class FakeChildTest : public ::testing::Test {
 protected:
  std::unique_ptr<Evaluator> Make(std::vector<int> gpus = {0},
                                  std::vector<std::string> args = {}) {
    EvaluatorOptions options;
    options.evaluator_path = KFORGE_FAKE_EVALUATOR_CHILD;
    options.gpus = std::move(gpus);
    options.child_args = std::move(args);
    options.startup_timeout_s = 30;
    absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(options);
    EXPECT_TRUE(evaluator.ok()) << evaluator.status();
    return evaluator.ok() ? *std::move(evaluator) : nullptr;
  }
};

TEST_F(FakeChildTest, PassReturnsTheChildsResult) {
  auto evaluator = Make();
  v1::EvaluationResult r = evaluator->Evaluate(Request("pass"), CompiledOk(), "abc");
  EXPECT_EQ(r.verdict(), v1::PASS) << r.diagnostics().message();
  EXPECT_NE(r.diagnostics().message().find("inputs=3"), std::string::npos);
  EXPECT_EQ(r.gpu_name(), "FakeGpu (test double)");
  EXPECT_EQ(r.policy_version(), kValidationPolicyVersion);
  EXPECT_FALSE(r.reconfirmed());
  EXPECT_EQ(evaluator->restarts(), 0);
  // The same child serves the next request.
  v1::EvaluationResult again = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(PidOf(again), PidOf(r));
  EXPECT_NE(again.diagnostics().message().find("calls=2"), std::string::npos);
}

TEST_F(FakeChildTest, HangIsKilledAsTimeoutAndTheNextRequestPasses) {
  auto evaluator = Make();
  v1::EvaluationResult first = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  ASSERT_EQ(first.verdict(), v1::PASS);
  v1::EvaluationResult hung = evaluator->Evaluate(Request("hang", 0.5), CompiledOk(), "");
  EXPECT_EQ(hung.verdict(), v1::TIMEOUT);
  EXPECT_NE(hung.diagnostics().message().find("time limit"), std::string::npos)
      << hung.diagnostics().message();
  EXPECT_EQ(evaluator->restarts(), 1);
  v1::EvaluationResult next = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(next.verdict(), v1::PASS);
  EXPECT_NE(PidOf(next), PidOf(first));  // a new child
}

TEST_F(FakeChildTest, CrashIsReportedWithStderrAndRecovered) {
  auto evaluator = Make();
  v1::EvaluationResult crashed = evaluator->Evaluate(Request("crash"), CompiledOk(), "");
  EXPECT_EQ(crashed.verdict(), v1::CRASH);
  EXPECT_NE(crashed.diagnostics().message().find("signal"), std::string::npos)
      << crashed.diagnostics().message();
  EXPECT_NE(crashed.diagnostics().log_excerpt().find("fake: crashing on purpose"),
            std::string::npos)
      << crashed.diagnostics().log_excerpt();
  EXPECT_EQ(evaluator->restarts(), 1);
  EXPECT_EQ(evaluator->Evaluate(Request("pass"), CompiledOk(), "").verdict(), v1::PASS);
}

TEST_F(FakeChildTest, LostContextRestartsTheChild) {
  auto evaluator = Make();
  std::string before = PidOf(evaluator->Evaluate(Request("pass"), CompiledOk(), ""));
  v1::EvaluationResult lost = evaluator->Evaluate(Request("lose-context"), CompiledOk(), "");
  EXPECT_EQ(lost.verdict(), v1::CRASH);
  EXPECT_EQ(evaluator->restarts(), 1);
  v1::EvaluationResult after = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(after.verdict(), v1::PASS);
  EXPECT_NE(PidOf(after), before);
}

TEST_F(FakeChildTest, FreshProcessIsANewChildAndMarksReconfirmed) {
  auto evaluator = Make();
  std::string before = PidOf(evaluator->Evaluate(Request("pass"), CompiledOk(), ""));
  v1::EvaluateRequest fresh = Request("pass");
  fresh.set_fresh_process(true);
  v1::EvaluationResult r = evaluator->Evaluate(fresh, CompiledOk(), "");
  EXPECT_EQ(r.verdict(), v1::PASS);
  EXPECT_TRUE(r.reconfirmed());
  EXPECT_NE(PidOf(r), before);
  EXPECT_NE(r.diagnostics().message().find("calls=1"), std::string::npos);
  EXPECT_EQ(evaluator->restarts(), 0);  // a planned restart is not a failure
}

TEST_F(FakeChildTest, CompileFailureNeverReachesAChild) {
  auto evaluator = Make();
  v1::CompileResult failed;
  failed.set_status(v1::COMPILE_FAILED);
  failed.set_log("kernel.cu(3): error: identifier \"x\" is undefined");
  v1::EvaluationResult r = evaluator->Evaluate(Request("crash"), failed, "");
  EXPECT_EQ(r.verdict(), v1::COMPILE_ERROR);
  EXPECT_NE(r.diagnostics().log_excerpt().find("undefined"), std::string::npos);
  EXPECT_EQ(evaluator->restarts(), 0);
}

TEST_F(FakeChildTest, StartFailureIsNotEvaluatedWithTheReason) {
  auto evaluator = Make({0}, {"--fail-start"});
  v1::EvaluationResult r = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(r.verdict(), v1::NOT_EVALUATED);
  EXPECT_NE(r.diagnostics().message().find("refusing to start"), std::string::npos);
  absl::StatusOr<std::vector<v1::GpuInfo>> info = evaluator->GetGpuInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("refusing to start"), std::string::npos);
}

TEST_F(FakeChildTest, MissingExecutableIsNotEvaluated) {
  EvaluatorOptions options;
  options.evaluator_path = "/nonexistent/kforge-evaluator";
  auto evaluator = Evaluator::Create(options);
  ASSERT_TRUE(evaluator.ok());
  v1::EvaluationResult r = (*evaluator)->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(r.verdict(), v1::NOT_EVALUATED);
  EXPECT_NE(r.diagnostics().message().find("/nonexistent/kforge-evaluator"), std::string::npos)
      << r.diagnostics().message();
}

TEST_F(FakeChildTest, GpuInfoComesFromEachChild) {
  auto evaluator = Make({0, 1});
  absl::StatusOr<std::vector<v1::GpuInfo>> info = evaluator->GetGpuInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->size(), 2u);
  EXPECT_EQ((*info)[0].name(), "FakeGpu (test double)");
  EXPECT_EQ((*info)[0].index(), 0);
  EXPECT_EQ((*info)[1].index(), 1);
}

TEST_F(FakeChildTest, TwoGpusServeTwoEvaluationsAtOnce) {
  auto evaluator = Make({0, 1});
  TempDir dir;
  std::string gate = (dir / "gate").string();
  v1::EvaluationResult blocked;
  std::thread holder(
      [&] { blocked = evaluator->Evaluate(Request("block:" + gate), CompiledOk(), ""); });
  // Once one GPU's child waits on the gate, the other GPU answers.
  while (!std::filesystem::exists(gate + ".started")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  v1::EvaluationResult other = evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  std::ofstream(gate) << "open";
  holder.join();
  EXPECT_EQ(other.verdict(), v1::PASS);
  EXPECT_EQ(blocked.verdict(), v1::PASS);
  // Each child saw only its own GPU.
  std::string a = blocked.diagnostics().message(), b = other.diagnostics().message();
  EXPECT_TRUE((absl::StrContains(a, "visible=0") && absl::StrContains(b, "visible=1")) ||
              (absl::StrContains(a, "visible=1") && absl::StrContains(b, "visible=0")))
      << a << " | " << b;
}

TEST_F(FakeChildTest, ObserverSeesVerdictsAndRestarts) {
  auto evaluator = Make();
  std::vector<EvaluationEvent> events;
  evaluator->SetObserver([&](const EvaluationEvent& e) { events.push_back(e); });
  evaluator->Evaluate(Request("pass"), CompiledOk(), "");
  evaluator->Evaluate(Request("crash"), CompiledOk(), "");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].verdict, v1::PASS);
  EXPECT_FALSE(events[0].child_restarted);
  EXPECT_EQ(events[1].verdict, v1::CRASH);
  EXPECT_TRUE(events[1].child_restarted);
  EXPECT_GE(events[1].busy_s, 0);
}

bool CudaDriverLoads() {
  void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

// The real child on this machine: no CUDA driver, so it cannot even start, and the
// supervisor says so as a verdict rather than failing.
TEST(RealEvaluatorTest, WithoutAGpuTheVerdictIsNotEvaluated) {
  if (CudaDriverLoads()) GTEST_SKIP() << "a CUDA driver is present; tests/gpu covers this host";
  EvaluatorOptions options;
  options.evaluator_path = KFORGE_EVALUATOR_CHILD;
  auto evaluator = Evaluator::Create(options);
  ASSERT_TRUE(evaluator.ok());
  v1::EvaluationResult r = (*evaluator)->Evaluate(Request("pass"), CompiledOk(), "");
  EXPECT_EQ(r.verdict(), v1::NOT_EVALUATED);
  EXPECT_NE(r.diagnostics().message().find(kNoGpuMessage), std::string::npos)
      << r.diagnostics().message();
  EXPECT_NE(r.diagnostics().log_excerpt().find("libcuda"), std::string::npos)
      << r.diagnostics().log_excerpt();
  absl::StatusOr<std::vector<v1::GpuInfo>> info = (*evaluator)->GetGpuInfo();
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find(kNoGpuMessage), std::string::npos);
  // The worker keeps going: a second request gets the same clean answer.
  EXPECT_EQ((*evaluator)->Evaluate(Request("pass"), CompiledOk(), "").verdict(),
            v1::NOT_EVALUATED);
}

}  // namespace
}  // namespace kforge
