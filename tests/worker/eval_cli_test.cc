// `kforge eval` end to end as a user runs it: clear errors for bad inputs, and on this
// machine (no GPU) a clean NOT_EVALUATED verdict after a real compile.
#include <ATen/ops/randn.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/tensor_io.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "services/worker/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/worker_test_targets.h"

namespace kforge {
namespace {

constexpr char kKernel[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_softmax(KfArgs args) {
  const long long cols = args.inputs[0].sizes[args.inputs[0].ndim - 1];
  const float* x = (const float*)args.inputs[0].data + blockIdx.x * cols;
  float* y = (float*)args.outputs[0].data + blockIdx.x * cols;
  if (threadIdx.x != 0) return;
  float m = -1e30f, s = 0.f;
  for (long long c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  for (long long c = 0; c < cols; ++c) s += __expf(x[c] - m);
  for (long long c = 0; c < cols; ++c) y[c] = __expf(x[c] - m) / s;
}
)";
constexpr char kPlan[] =
    R"({"launches": [{"entry": "kf_softmax", "grid": ["in0_numel / in0_size_last"], "block": [32]}]})";

class EvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_dir_ = dir_ / "targets" / "test-softmax";
    std::filesystem::create_directories(target_dir_);
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(testing::SoftmaxTarget(16, 64), &json)
                    .ok());
    std::ofstream(target_dir_ / "target.json") << json;
    ASSERT_TRUE(WriteTensors((target_dir_ / "inputs.pt").string(), {{"0", at::randn({16, 64})}})
                    .ok());
    Write("kernel.cu", kKernel);
    Write("plan.json", kPlan);
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  SubprocessResult Eval(const std::string& target, const std::string& kernel,
                        const std::string& plan, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {KFORGE_CLI, "eval", "--target", target, "--kernel",
                                     (dir_ / kernel).string(), "--plan", (dir_ / plan).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    SubprocessOptions options;
    options.time_limit = absl::Seconds(150);
    options.working_dir = dir_.str();
    absl::StatusOr<SubprocessResult> result = RunSubprocess(argv, "", options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SubprocessResult{};
  }

  TempDir dir_;
  std::filesystem::path target_dir_;
};

TEST_F(EvalCliTest, MissingTargetSaysSo) {
  SubprocessResult r = Eval((dir_ / "nope").string(), "kernel.cu", "plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("does not exist"), std::string::npos) << r.stderr_data;
}

TEST_F(EvalCliTest, KernelThatIsNotUtf8IsRefused) {
  Write("bad.cu", std::string("extern \"C\" __global__ void kf_softmax() {}\n\xff\xfe", 45));
  SubprocessResult r = Eval(target_dir_.string(), "bad.cu", "plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("not valid UTF-8"), std::string::npos) << r.stderr_data;
}

TEST_F(EvalCliTest, OversizedKernelIsRefused) {
  Write("big.cu", std::string(300 * 1024, ' '));
  SubprocessResult r = Eval(target_dir_.string(), "big.cu", "plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("at most"), std::string::npos) << r.stderr_data;
}

TEST_F(EvalCliTest, PlanThatIsNotJsonIsRefused) {
  Write("plan.txt", "launches: kf_softmax");
  SubprocessResult r = Eval(target_dir_.string(), "kernel.cu", "plan.txt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("is not JSON"), std::string::npos) << r.stderr_data;
}

TEST_F(EvalCliTest, PlanNamingAnUnknownEntryPointIsRefused) {
  Write("other.json",
        R"({"launches": [{"entry": "kf_missing", "grid": [1], "block": [32]}]})");
  SubprocessResult r = Eval(target_dir_.string(), "kernel.cu", "other.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("kf_missing"), std::string::npos) << r.stderr_data;
}

TEST_F(EvalCliTest, TargetIdUnderKforgeOutIsFound) {
  std::filesystem::create_directories(dir_ / "kforge-out");
  std::filesystem::rename(dir_ / "targets", dir_ / "kforge-out" / "targets");
  SubprocessResult r = Eval("test-softmax", "kernel.cu", "plan.json", {"--json"});
  // Found and compiled; whether it then evaluates depends on this machine having a GPU.
  EXPECT_NE(r.exit_code, 2) << r.stderr_data;
  EXPECT_NE(r.stdout_data.find("\"verdict\""), std::string::npos) << r.stdout_data;
}

TEST_F(EvalCliTest, WithoutAGpuTheVerdictIsNotEvaluated) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "this machine has a GPU";
  SubprocessResult r = Eval(target_dir_.string(), "kernel.cu", "plan.json");
  EXPECT_EQ(r.exit_code, 3) << r.stdout_data << r.stderr_data;
  EXPECT_NE(r.stdout_data.find("NOT_EVALUATED"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("no CUDA driver/GPU on this machine"), std::string::npos)
      << r.stdout_data;
}

}  // namespace
}  // namespace kforge
