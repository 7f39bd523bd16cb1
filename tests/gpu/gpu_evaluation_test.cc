// The evaluator on a real GPU (label gpu; run on an H200): correct softmax and group-norm
// kernels PASS, a planted set of bad kernels is each rejected with the right reason while the
// worker's Evaluator stays up and the next good kernel passes, a slower variant times slower
// and two evaluations of one kernel agree. Kernels live in tests/gpu/kernels/.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_format.h"
#include "common/tensor_io.h"
#include "gtest/gtest.h"
#include "services/proposer/synth/target_args.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "tests/worker/worker_test_targets.h"

namespace kforge {
namespace {

// The kernels beside this file; a copied tree (a GPU machine) finds them from the repository
// root or through $KFORGE_GPU_KERNELS_DIR.
std::string KernelsDir() {
  if (const char* dir = std::getenv("KFORGE_GPU_KERNELS_DIR")) return dir;
  if (std::filesystem::exists(KFORGE_GPU_KERNELS_DIR)) return KFORGE_GPU_KERNELS_DIR;
  return "tests/gpu/kernels";
}

std::string ReadKernelFile(const std::string& name) {
  std::ifstream in(KernelsDir() + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << "missing tests/gpu/kernels/" << name;
  return ss.str();
}

std::string Serialize(std::vector<at::Tensor> tensors) {
  std::vector<NamedTensor> named;
  for (size_t i = 0; i < tensors.size(); ++i) named.push_back({std::to_string(i), tensors[i]});
  absl::StatusOr<std::string> bytes = SerializeTensors(named);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::string Describe(const v1::EvaluationResult& r) {
  return v1::Verdict_Name(r.verdict()) + " [" + r.diagnostics().input_set() + "] " +
         r.diagnostics().message() + "\n" + r.diagnostics().log_excerpt();
}

class GpuEvaluationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, nullptr);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = compiler->release();
    // kforge-evaluator is found beside this binary (both land in the build's bin/).
    EvaluatorOptions options;
    absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(options);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    evaluator_ = evaluator->release();
    pipeline_ = new EvaluationPipeline(compiler_, evaluator_, nullptr);
    at::manual_seed(1234);
    softmax_inputs_ = new std::string(Serialize({at::randn({4096, 1024}) * 3}));
    group_norm_inputs_ = new std::string(Serialize({at::randn({8, 256, 32, 32}) * 2 + 0.5,
                                                    at::randn({256}) * 0.5 + 1,
                                                    at::randn({256}) * 0.1}));
  }

  static v1::EvaluationResult Softmax(const std::string& kernel, bool timing = false,
                                      const std::string& plan = "softmax_rows.json",
                                      double time_limit_s = 60, bool fresh = false,
                                      bool sanitizer = false) {
    return Run(testing::SoftmaxTarget(4096, 1024), *softmax_inputs_, kernel, plan, timing,
               time_limit_s, fresh, sanitizer);
  }

  static v1::EvaluationResult Run(const v1::Target& target, const std::string& inputs,
                                  const std::string& kernel, const std::string& plan,
                                  bool timing, double time_limit_s, bool fresh,
                                  bool sanitizer) {
    return RunText(target, inputs, ReadKernelFile(kernel), ReadKernelFile(plan), timing,
                   time_limit_s, fresh, sanitizer);
  }

  static v1::EvaluationResult RunText(const v1::Target& target, const std::string& inputs,
                                      const std::string& source, const std::string& plan,
                                      bool timing = false, double time_limit_s = 60,
                                      bool fresh = false, bool sanitizer = false) {
    v1::EvaluateRequest request;
    *request.mutable_target() = target;
    request.mutable_candidate()->set_source(source);
    request.mutable_candidate()->set_launch_plan_json(plan);
    *request.mutable_policy() = DefaultValidationPolicy();
    request.mutable_policy()->set_time_limit_s(time_limit_s);
    request.mutable_policy()->set_compute_sanitizer(sanitizer);
    request.set_timing(timing);
    request.set_fresh_process(fresh);
    return pipeline_->Evaluate(request, inputs);
  }

  // The worker survived whatever came before: the good kernel still passes.
  static void ExpectGoodSoftmaxStillPasses() {
    v1::EvaluationResult r = Softmax("softmax_rows.cu");
    EXPECT_EQ(r.verdict(), v1::PASS) << Describe(r);
  }

  static void ExpectRejected(const std::string& kernel, std::set<v1::Verdict> allowed,
                             const std::string& input_set = "",
                             const std::string& plan = "softmax_rows.json",
                             double time_limit_s = 60) {
    v1::EvaluationResult r = Softmax(kernel, false, plan, time_limit_s);
    EXPECT_TRUE(allowed.count(r.verdict())) << kernel << ": " << Describe(r);
    if (!input_set.empty()) {
      EXPECT_EQ(r.diagnostics().input_set(), input_set) << Describe(r);
    }
    ExpectGoodSoftmaxStillPasses();
  }

  static Compiler* compiler_;
  static Evaluator* evaluator_;
  static EvaluationPipeline* pipeline_;
  static std::string* softmax_inputs_;
  static std::string* group_norm_inputs_;
};

Compiler* GpuEvaluationTest::compiler_ = nullptr;
Evaluator* GpuEvaluationTest::evaluator_ = nullptr;
EvaluationPipeline* GpuEvaluationTest::pipeline_ = nullptr;
std::string* GpuEvaluationTest::softmax_inputs_ = nullptr;
std::string* GpuEvaluationTest::group_norm_inputs_ = nullptr;

TEST_F(GpuEvaluationTest, GpuInfoIsMeasured) {
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator_->GetGpuInfo();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 1u);
  const v1::GpuInfo& gpu = (*gpus)[0];
  EXPECT_FALSE(gpu.name().empty());
  EXPECT_EQ(gpu.arch().rfind("sm_", 0), 0u);
  EXPECT_GT(gpu.sm_count(), 0);
  EXPECT_GT(gpu.l2_bytes(), 0);
  EXPECT_GT(gpu.shared_memory_per_block_optin(), 48 * 1024);
  EXPECT_GT(gpu.copy_bandwidth_bytes_per_s(), 1e11);
  // Any CUDA GPU of the last decade does over a TFLOP/s of fp32, and its tensor cores more.
  EXPECT_GT(gpu.peak_flops(), 1e12);
  EXPECT_GT(gpu.peak_tensor_flops(), gpu.peak_flops());
  std::printf("GPU %s %s: copy bandwidth %.0f GB/s, peak %.1f TFLOP/s fp32, %.0f TFLOP/s bf16\n",
              gpu.name().c_str(), gpu.arch().c_str(), gpu.copy_bandwidth_bytes_per_s() / 1e9,
              gpu.peak_flops() / 1e12, gpu.peak_tensor_flops() / 1e12);
}

TEST_F(GpuEvaluationTest, CorrectSoftmaxPassesWithTimings) {
  v1::EvaluationResult r = Softmax("softmax_rows.cu", /*timing=*/true);
  ASSERT_EQ(r.verdict(), v1::PASS) << Describe(r);
  EXPECT_GT(r.candidate().median_s(), 0);
  EXPECT_LE(r.candidate().ci_low_s(), r.candidate().median_s());
  EXPECT_GE(r.candidate().ci_high_s(), r.candidate().median_s());
  EXPECT_GE(r.candidate().reps(), 30);
  EXPECT_GT(r.eager().median_s(), 0);
  EXPECT_GT(r.speedup(), 0);
  EXPECT_GT(r.floor_s(), 0);
  EXPECT_FALSE(r.gpu_name().empty());
  EXPECT_EQ(r.resources().entry_point(), "kf_softmax_rows");
}

TEST_F(GpuEvaluationTest, CorrectGroupNormPasses) {
  v1::EvaluationResult r = Run(testing::GroupNormTarget(8, 256, 32, 32, 32), *group_norm_inputs_,
                               "group_norm.cu", "group_norm.json", /*timing=*/true, 60, false,
                               false);
  ASSERT_EQ(r.verdict(), v1::PASS) << Describe(r);
  EXPECT_GT(r.candidate().median_s(), 0);
  EXPECT_GT(r.eager().median_s(), 0);
}

// aten::add_ (in place): the kernel also runs with its output in self's memory, as the
// runtime launches it. Launching add_in_place.cu twice (add_twice.json) is right when the
// output is memory of its own and wrong in place, where the second launch reads the first's
// sums: x + 2 * other.
TEST_F(GpuEvaluationTest, InPlaceTargetsAlsoRunInPlace) {
  const std::string inputs = Serialize({at::randn({512, 1024}), at::randn({512, 1024})});
  const v1::Target target = testing::AddInPlaceTarget(512, 1024);
  v1::EvaluationResult good = Run(target, inputs, "add_in_place.cu", "add_in_place.json",
                                  /*timing=*/true, 60, false, false);
  ASSERT_EQ(good.verdict(), v1::PASS) << Describe(good);
  EXPECT_GT(good.candidate().median_s(), 0);
  EXPECT_GT(good.eager().median_s(), 0);
  v1::EvaluationResult twice = Run(target, inputs, "add_in_place.cu", "add_twice.json",
                                   /*timing=*/false, 60, false, false);
  EXPECT_EQ(twice.verdict(), v1::MISMATCH) << Describe(twice);
  EXPECT_NE(twice.diagnostics().message().find("run in place"), std::string::npos)
      << Describe(twice);
}

// The launcher runs a launch's captured entry for the plan's captured call (its shape key and
// alignment) and the entry for every other call: a wrong captured entry is caught on the
// captured input set, and under a key no call has it never runs.
TEST_F(GpuEvaluationTest, CapturedEntryRunsForTheCapturedCallOnly) {
  const std::string inputs = Serialize({at::randn({512, 1024}), at::randn({512, 1024})});
  const v1::Target target = testing::AddInPlaceTarget(512, 1024);
  const uint64_t key = synth::CapturedShapeKey(target);
  auto plan = [](uint64_t shape_key) {
    return absl::StrFormat(
        R"({"launches": [{"entry": "kf_add", "captured_entry": "kf_add_captured",
                          "grid": ["1024"], "block": [256]}],
            "requires": {"contiguous": true, "alignment_bytes": 4},
            "captured": {"shape_key": "0x%016x", "alignment_bytes": 16}})",
        shape_key);
  };
  const std::string source =
      ReadKernelFile("add_in_place.cu") + ReadKernelFile("add_captured_entry.cu");
  const std::string wrong = "#define CAPTURED_WRONG 1\n" + source;
  v1::EvaluationResult good = RunText(target, inputs, source, plan(key), true);
  ASSERT_EQ(good.verdict(), v1::PASS) << Describe(good);
  EXPECT_GT(good.candidate().median_s(), 0);
  v1::EvaluationResult caught = RunText(target, inputs, wrong, plan(key));
  EXPECT_EQ(caught.verdict(), v1::MISMATCH) << Describe(caught);
  EXPECT_EQ(caught.diagnostics().input_set(), "captured") << Describe(caught);
  v1::EvaluationResult never_run = RunText(target, inputs, wrong, plan(key ^ 1));
  EXPECT_EQ(never_run.verdict(), v1::PASS) << Describe(never_run);
}

TEST_F(GpuEvaluationTest, UnwrittenLastElement) {
  ExpectRejected("softmax_unwritten_last.cu", {v1::UNWRITTEN_OUTPUT}, "captured");
  v1::EvaluationResult r = Softmax("softmax_unwritten_last.cu");
  EXPECT_EQ(r.diagnostics().first_bad_index(), 4096LL * 1024 - 1) << Describe(r);
}

TEST_F(GpuEvaluationTest, ZeroedInput) {
  ExpectRejected("softmax_zero_input.cu", {v1::INPUT_MUTATED}, "captured");
}

TEST_F(GpuEvaluationTest, SharedMemoryRace) {
  ExpectRejected("softmax_race.cu", {v1::NONDETERMINISTIC, v1::MISMATCH});
}

TEST_F(GpuEvaluationTest, WriteOnePastTheOutput) {
  ExpectRejected("softmax_oob_write.cu", {v1::OUT_OF_BOUNDS}, "captured");
}

TEST_F(GpuEvaluationTest, InfiniteLoopIsKilled) {
  const int64_t before = evaluator_->restarts();
  ExpectRejected("softmax_hang.cu", {v1::TIMEOUT}, "", "softmax_rows.json", 15);
  EXPECT_EQ(evaluator_->restarts(), before + 1);
}

TEST_F(GpuEvaluationTest, IllegalAddress) {
  ExpectRejected("softmax_illegal_address.cu", {v1::OUT_OF_BOUNDS}, "captured");
}

TEST_F(GpuEvaluationTest, OutputCachedAcrossCalls) {
  ExpectRejected("softmax_cached.cu", {v1::MISMATCH}, "random:1");
}

TEST_F(GpuEvaluationTest, HalfPrecisionAccumulation) {
  v1::EvaluationResult r = Softmax("softmax_fp16_accum.cu");
  EXPECT_EQ(r.verdict(), v1::MISMATCH) << Describe(r);
  EXPECT_GT(r.diagnostics().max_abs_error(), 1e-5);
  EXPECT_GT(r.diagnostics().tolerance(), 0);
  ExpectGoodSoftmaxStillPasses();
}

TEST_F(GpuEvaluationTest, ShapeHardCodedToTheCapture) {
  ExpectRejected("softmax_hardcoded.cu", {v1::MISMATCH, v1::UNWRITTEN_OUTPUT}, "heldout",
                 "softmax_hardcoded.json");
}

TEST_F(GpuEvaluationTest, TrapCrashes) {
  ExpectRejected("softmax_trap.cu", {v1::CRASH});
}

TEST_F(GpuEvaluationTest, SanitizerSeesAnOutOfBoundsRead) {
  if (!std::filesystem::exists("/usr/local/cuda/bin/compute-sanitizer")) {
    const char* path = std::getenv("PATH");
    if (path == nullptr || std::string(path).find("cuda") == std::string::npos) {
      GTEST_SKIP() << "compute-sanitizer not found";
    }
  }
  // Without the sanitizer the read is invisible (it changes no output).
  v1::EvaluationResult plain = Softmax("softmax_oob_read.cu");
  EXPECT_EQ(plain.verdict(), v1::PASS) << Describe(plain);
  v1::EvaluationResult sanitized =
      Softmax("softmax_oob_read.cu", false, "softmax_rows.json", 120, false, /*sanitizer=*/true);
  EXPECT_EQ(sanitized.verdict(), v1::OUT_OF_BOUNDS) << Describe(sanitized);
  ExpectGoodSoftmaxStillPasses();
}

TEST_F(GpuEvaluationTest, SlowerVariantIsTimedSlower) {
  v1::EvaluationResult good = Softmax("softmax_rows.cu", true);
  v1::EvaluationResult slow = Softmax("softmax_rows_slow.cu", true);
  ASSERT_EQ(good.verdict(), v1::PASS) << Describe(good);
  ASSERT_EQ(slow.verdict(), v1::PASS) << Describe(slow);
  EXPECT_GT(slow.candidate().ci_low_s(), good.candidate().ci_high_s())
      << "good " << good.candidate().median_s() << " s, slow " << slow.candidate().median_s()
      << " s";
  EXPECT_LT(slow.speedup(), good.speedup());
}

TEST_F(GpuEvaluationTest, TwoEvaluationsAgreeWithinTheirIntervals) {
  v1::EvaluationResult a = Softmax("softmax_rows.cu", true);
  v1::EvaluationResult b = Softmax("softmax_rows.cu", true, "softmax_rows.json", 60,
                                   /*fresh=*/true);
  ASSERT_EQ(a.verdict(), v1::PASS) << Describe(a);
  ASSERT_EQ(b.verdict(), v1::PASS) << Describe(b);
  EXPECT_TRUE(b.reconfirmed());
  // Each median lies within the other's 95% interval, widened by 3% for the clock drift
  // between two processes.
  const double slack = 0.03 * std::min(a.candidate().median_s(), b.candidate().median_s());
  EXPECT_GE(a.candidate().median_s(), b.candidate().ci_low_s() - slack);
  EXPECT_LE(a.candidate().median_s(), b.candidate().ci_high_s() + slack);
  EXPECT_GE(b.candidate().median_s(), a.candidate().ci_low_s() - slack);
  EXPECT_LE(b.candidate().median_s(), a.candidate().ci_high_s() + slack);
}

TEST_F(GpuEvaluationTest, LaunchBoundTargetIsTimedWithGraphs) {
  at::manual_seed(5);
  std::string inputs = Serialize({at::randn({64, 128})});
  v1::EvaluationResult r = Run(testing::SoftmaxTarget(64, 128), inputs, "softmax_rows.cu",
                               "softmax_rows.json", true, 60, false, false);
  ASSERT_EQ(r.verdict(), v1::PASS) << Describe(r);
  EXPECT_EQ(r.candidate().mode(), "cuda_graph");
  EXPECT_EQ(r.eager().mode(), "cuda_graph");
  EXPECT_GT(r.candidate().median_s(), 0);
}

}  // namespace
}  // namespace kforge
