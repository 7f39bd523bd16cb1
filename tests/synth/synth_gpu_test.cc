// GPU test (label gpu; CI skips it; run on an H200): for every family and dtype, a seeded
// random sample of synthesized configurations, plus the synthesizer's top root, passes the
// worker's full validation (captured + random input sets, held-out shape, poisoned outputs,
// input hashing, determinism, canaries) through the real Compiler and Evaluator.
#include <ATen/ATen.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include <atomic>
#include <limits>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/local_store.h"
#include "common/tensor_io.h"
#include "common/tensor_signature.h"
#include "gtest/gtest.h"
#include "services/worker/reference.h"
#include "services/proposer/synth/synthesizer.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "tests/support/temp_dir.h"
#include "tests/synth/sample_targets.h"

namespace kforge::synth {
namespace {

constexpr int kRandomConfigsPerTarget = 2;

// A causal mask as language models build it: 0 where a key is at or before its query (the
// last two dims), the dtype's lowest value elsewhere, so that the softmax after it takes exps
// of values near the float range's end (a shifted exp that overflows there fails here).
at::Tensor CausalMask(const std::vector<int64_t>& sizes, at::ScalarType dtype) {
  float lowest = std::numeric_limits<float>::lowest();
  if (dtype == at::kHalf) lowest = std::numeric_limits<c10::Half>::lowest();
  if (dtype == at::kBFloat16) lowest = std::numeric_limits<c10::BFloat16>::lowest();
  const int64_t queries = sizes[sizes.size() - 2], keys = sizes.back();
  at::Tensor query = at::arange(queries).reshape({queries, 1});
  at::Tensor key = at::arange(keys).reshape({1, keys}) - (keys - queries);
  return at::zeros({queries, keys}, dtype).masked_fill(key.gt(query), lowest).expand(sizes)
      .contiguous();
}

// One real-looking call: normal inputs, positive running variances, weights near 1, and a
// causal mask for the mask a chain adds before its softmax.
std::string CapturedInputs(const v1::Target& target) {
  std::map<std::string, std::string> arg_of;
  for (const v1::Argument& arg : target.nodes(0).args()) {
    if (arg.kind_case() == v1::Argument::kTensor) arg_of[arg.tensor()] = arg.name();
  }
  bool softmax = false;
  std::string mask;  // the input an add of the chain takes as its `other`
  for (const v1::SubgraphNode& node : target.nodes()) {
    softmax = softmax || node.op() == "aten::softmax";
    if (node.op() != "aten::add") continue;
    for (const v1::Argument& arg : node.args()) {
      if (arg.kind_case() == v1::Argument::kTensor && arg.name() == "other") mask = arg.tensor();
    }
  }
  if (!softmax) mask.clear();
  std::vector<NamedTensor> tensors;
  for (int i = 0; i < target.inputs_size(); ++i) {
    const v1::TensorSignature& sig = target.inputs(i);
    std::vector<int64_t> sizes(sig.sizes().begin(), sig.sizes().end());
    if (!IsContiguous(sig)) {  // a view (transposed, expanded): values for the storage it spans
      std::vector<int64_t> strides(sig.strides().begin(), sig.strides().end());
      int64_t span = 1;
      for (size_t d = 0; d < sizes.size(); ++d) span += (sizes[d] - 1) * strides[d];
      at::Tensor base = at::randn({span}).to(ToScalarType(sig.dtype()));
      tensors.push_back({target.input_names(i), base.as_strided(sizes, strides)});
      continue;
    }
    if (target.input_names(i) == mask && sizes.size() >= 2) {
      tensors.push_back({mask, CausalMask(sizes, ToScalarType(sig.dtype()))});
      continue;
    }
    at::Tensor t = at::randn(sizes);
    if (sig.dtype() == v1::BOOL) t = t.gt(0);  // a mask, about half set
    const std::string& role = arg_of[target.input_names(i)];
    if (role == "running_var") t = t.abs() + 0.5;
    if (role == "weight") t = t * 0.1 + 1;
    // A divisor as models have them (a norm, a root), away from 0: near it a float16 quotient
    // overflows where the float64 reference does not, and every kernel, eager too, fails.
    if (role == "other" && target.nodes(0).op() == "aten::div") t = t.abs() + 0.5;
    tensors.push_back({target.input_names(i), t.to(ToScalarType(sig.dtype()))});
  }
  absl::StatusOr<std::string> bytes = SerializeTensors(tensors);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::string Describe(const v1::EvaluationResult& r) {
  return absl::StrCat(v1::Verdict_Name(r.verdict()), " [", r.diagnostics().input_set(), "] ",
                      r.diagnostics().message(), "\n", r.diagnostics().log_excerpt());
}

class SynthGpuTest : public ::testing::TestWithParam<std::tuple<std::string, v1::DType>> {
 protected:
  static void SetUpTestSuite() {
    // A compile cache, so that ExpectPass compiles a sample's kernels on every core at once
    // and the evaluations, one at a time on the GPU, find them compiled.
    static TempDir cache_dir;
    auto cache = LocalStore::Create(cache_dir.str());
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = cache->release();
    auto compiler = Compiler::Create({}, cache_);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = compiler->release();
    auto evaluator = Evaluator::Create(EvaluatorOptions{});  // kforge-evaluator beside us
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    evaluator_ = evaluator->release();
    pipeline_ = new EvaluationPipeline(compiler_, evaluator_, nullptr);
    at::manual_seed(4321);
  }

  // Kernels of one sample target, with the inputs they are validated on.
  struct SampleRun {
    std::string name;
    v1::Target target;
    std::string inputs;
    std::vector<std::pair<std::string, GeneratedKernel>> kernels;
  };

  // Full validation of every run's kernels; returns how many were evaluated. They compile on
  // up to 8 cores at once into the compiler's cache first, then evaluate one at a time on the
  // GPU, which finds them compiled.
  static int ExpectPass(const std::vector<SampleRun>& runs) {
    struct Job {
      const SampleRun* run;
      const std::string* label;
      v1::EvaluateRequest request;
    };
    std::vector<Job> jobs;
    for (const SampleRun& run : runs) {
      for (const auto& [label, kernel] : run.kernels) {
        Job& job = jobs.emplace_back(Job{&run, &label, {}});
        *job.request.mutable_target() = run.target;
        job.request.mutable_candidate()->set_source(kernel.source);
        job.request.mutable_candidate()->set_launch_plan_json(kernel.launch_plan_json);
        job.request.mutable_options()->set_arch("sm_90");
        *job.request.mutable_policy() = DefaultValidationPolicy();
      }
    }
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (size_t w = 0; w < std::min<size_t>(8, jobs.size()); ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < jobs.size(); i = next++) {
          compiler_->Compile(jobs[i].request.candidate(), jobs[i].request.options());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Job& job : jobs) {
      v1::EvaluationResult result = pipeline_->Evaluate(job.request, job.run->inputs);
      EXPECT_EQ(result.verdict(), v1::PASS)
          << job.run->name << " " << v1::DType_Name(job.run->target.inputs(0).dtype()) << " "
          << *job.label << ": " << Describe(result);
    }
    return static_cast<int>(jobs.size());
  }

  // Two configs with `param` = `value` (any but "1" when value is empty) of every sample target
  // whose space has the param, fp32 and bf16, through full validation on the captured and the
  // held-out shape; returns how many were evaluated.
  static int ExpectConfigsWithParamPass(const std::string& param, const std::string& value) {
    return ExpectConfigsPass({}, param, value);
  }

  // The same, each sampled config first given `forced` (name=value;...), for a value that only
  // a corner of the space takes: the configs that stay valid with it.
  static int ExpectConfigsPass(const std::string& forced, const std::string& param,
                               const std::string& value) {
    std::vector<SampleRun> runs;
    int sampled = 0;
    for (v1::DType dtype : {v1::FLOAT32, v1::BFLOAT16}) {
      for (auto& sample : testing::SampleTargets(dtype)) {
        v1::Target target = sample.target;
        target.set_shape_generic(true);
        auto generator = testing::BindForTest(target);
        if (generator == nullptr) return ExpectPass(runs);
        std::vector<std::pair<std::string, GeneratedKernel>> kernels;
        for (Config config : testing::ValidSample(*generator, 400, 77 + sampled)) {
          for (const auto& [name, v] : SplitParams(forced)) {
            if (generator->Space().Find(name) != nullptr) config.Set(name, v);
          }
          config = generator->Canonicalize(config);
          if (!generator->Space().Contains(config) || !generator->Check(config).empty()) continue;
          const std::string v = config.Get(param);
          const bool wanted = value.empty() ? v != "1" : v == value;
          if (v.empty() || !wanted || kernels.size() == 2) continue;
          auto kernel = generator->Generate(config);
          EXPECT_TRUE(kernel.ok()) << kernel.status();
          if (kernel.ok()) kernels.emplace_back(config.ToString(), *kernel);
        }
        if (kernels.empty()) continue;  // not a target with the param
        sampled += static_cast<int>(kernels.size());
        std::string inputs = CapturedInputs(target);
        runs.push_back({sample.name, std::move(target), std::move(inputs), std::move(kernels)});
      }
    }
    return ExpectPass(runs);
  }

  static Store* cache_;
  static Compiler* compiler_;
  static Evaluator* evaluator_;
  static EvaluationPipeline* pipeline_;
};

Store* SynthGpuTest::cache_ = nullptr;
Compiler* SynthGpuTest::compiler_ = nullptr;
Evaluator* SynthGpuTest::evaluator_ = nullptr;
EvaluationPipeline* SynthGpuTest::pipeline_ = nullptr;

TEST_P(SynthGpuTest, SampledConfigsPassFullValidation) {
  const auto& [family, dtype] = GetParam();
  Synthesizer synth;
  std::vector<SampleRun> runs;
  int sampled = 0;
  for (auto& sample : testing::SampleTargets(dtype)) {
    if (sample.family != family) continue;
    v1::Target target = sample.target;
    // Also validate on the evaluator's held-out shape, but for a reshape, whose shape
    // argument fixes the element count.
    target.set_shape_generic(target.nodes(0).op() != "aten::reshape");
    std::string inputs = CapturedInputs(target);
    auto generator = testing::BindForTest(target);
    ASSERT_NE(generator, nullptr);

    std::vector<std::pair<std::string, GeneratedKernel>> kernels;
    for (const Config& config :
         testing::ValidSample(*generator, kRandomConfigsPerTarget, 9000 + sampled)) {
      auto kernel = generator->Generate(config);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.emplace_back(config.ToString(), *kernel);
    }
    v1::ProposeRequest request;
    *request.mutable_target() = target;
    request.set_n(1);
    auto roots = synth.Propose(request);
    ASSERT_TRUE(roots.ok() && roots->candidates_size() == 1);
    kernels.emplace_back("top root", GeneratedKernel{roots->candidates(0).source(),
                                                     roots->candidates(0).launch_plan_json()});
    sampled += static_cast<int>(kernels.size());
    runs.push_back({sample.name, std::move(target), std::move(inputs), std::move(kernels)});
  }
  EXPECT_GT(ExpectPass(runs), 0);
}

// Rows split in one cooperative launch (split_mode=sync), the only configs whose blocks wait
// for each other, with the scratch that holds their arrival counters poisoned before every run.
TEST_F(SynthGpuTest, SyncSplitsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("split_mode", "sync"), 20);
  EXPECT_GE(ExpectConfigsWithParamPass("split_mode", "sync_keep"), 10);
}

// Rows split through scratch whose output pass is a pointwise launch (split_mode=stream): its
// vectors step across row boundaries, and the held-out shapes change where they fall.
TEST_F(SynthGpuTest, StreamSplitsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("split_mode", "stream"), 10);
}

// Rows split into chunks that blocks take in ticket order (split_mode=ordered), waiting for
// each other's partials, with the scratch of their counters poisoned before every run; the
// held-out shapes change the row blocks and the lag.
TEST_F(SynthGpuTest, OrderedSplitsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("split_mode", "ordered"), 10);
}

// Broadcast inputs loaded once for several output rows (reuse > 1): the held-out shapes also
// change the row length and leave a last row group short.
TEST_F(SynthGpuTest, RowReuseConfigsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("reuse", ""), 4);
}

// Rows walked by the row of a chain operand they share (row_order=operand, an attention
// mask over heads), on a causal mask: the held-out shapes change the heads and the rows.
TEST_F(SynthGpuTest, OperandRowOrderConfigsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("row_order", "operand"), 4);
}

// Rows held in registers after the chain's prologue (cache=regs), a two-pass softmax's exps
// kept there for its output pass.
TEST_F(SynthGpuTest, RegisterCacheConfigsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("cache", "regs"), 10);
}

// Rows kept in shared memory as float after the chain's prologue (cache=smem_f32): every
// later pass reads values the prologue has been applied to, from there or, where the row
// outgrows the shared memory, from global memory through the prologue again.
TEST_F(SynthGpuTest, SmemAfterPrologueConfigsPassFullValidation) {
  EXPECT_GE(ExpectConfigsWithParamPass("cache", "smem_f32"), 4);
}

// An ordered split that keeps the values after the chain's prologue in the output buffer
// (cache=output): a write re-reads what other blocks' reads stored in this launch.
TEST_F(SynthGpuTest, OutputStashConfigsPassFullValidation) {
  EXPECT_GE(ExpectConfigsPass("split_mode=ordered;row_threads=256;rows_per_block=1;cache=output",
                              "cache", "output"),
            2);
}

std::string Name(const ::testing::TestParamInfo<std::tuple<std::string, v1::DType>>& info) {
  return absl::StrCat(std::get<0>(info.param), "_", v1::DType_Name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    AllFamilies, SynthGpuTest,
    ::testing::Combine(::testing::Values("rowwise", "group_norm", "batch_norm", "pooling",
                                         "reduction", "elementwise", "layout"),
                       ::testing::Values(v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16)),
    Name);

}  // namespace
}  // namespace kforge::synth
