// kforge-worker-bench: throughput and noise of the worker on this machine's GPU (run it on an
// H200). Prints a table: compile latency p50/p95 cold and cached, evaluations per minute per
// GPU for a ~10 us and a ~1 ms target, and the timing CV of each.
//   kforge-worker-bench [--kernels DIR] [--evaluations N] [--compiles N]
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/store.h"
#include "common/tensor_io.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "services/worker/evaluator_stats.h"
#include "tests/worker/worker_test_targets.h"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Serialize(const at::Tensor& t) {
  absl::StatusOr<std::string> bytes = SerializeTensors({{"0", t}});
  if (!bytes.ok()) {
    std::fprintf(stderr, "cannot serialize inputs: %s\n", std::string(bytes.status().message()).c_str());
    std::exit(1);
  }
  return *bytes;
}

struct EvalRow {
  std::string name;
  double per_minute = 0;
  double candidate_s = 0, eager_s = 0, cv = 0, eager_cv = 0;
  std::string mode, verdict;
};

EvalRow BenchEvaluations(EvaluationPipeline& pipeline, const std::string& name,
                         const v1::Target& target, const std::string& inputs,
                         const std::string& source, const std::string& plan, int n) {
  v1::EvaluateRequest request;
  *request.mutable_target() = target;
  request.mutable_candidate()->set_source(source);
  request.mutable_candidate()->set_launch_plan_json(plan);
  *request.mutable_policy() = DefaultValidationPolicy();
  request.mutable_policy()->set_time_limit_s(600);
  request.set_timing(true);
  EvalRow row;
  row.name = name;
  pipeline.Evaluate(request, inputs);  // warm: child start, compile cache, lazy CUDA modules
  std::vector<double> cvs, eager_cvs, cand, eager;
  Clock::time_point start = Clock::now();
  for (int i = 0; i < n; ++i) {
    v1::EvaluationResult r = pipeline.Evaluate(request, inputs);
    row.verdict = v1::Verdict_Name(r.verdict());
    if (r.verdict() != v1::PASS) {
      std::fprintf(stderr, "%s: %s: %s\n", name.c_str(), row.verdict.c_str(),
                   r.diagnostics().message().c_str());
      continue;
    }
    cvs.push_back(r.candidate().cv());
    eager_cvs.push_back(r.eager().cv());
    cand.push_back(r.candidate().median_s());
    eager.push_back(r.eager().median_s());
    row.mode = r.candidate().mode();
  }
  row.per_minute = 60.0 * n / Seconds(start);
  row.candidate_s = Median(cand);
  row.eager_s = Median(eager);
  row.cv = Median(cvs);
  row.eager_cv = Median(eager_cvs);
  return row;
}

int Main(int argc, char** argv) {
  std::string kernels = KFORGE_BENCH_KERNELS_DIR;
  int evaluations = 5, compiles = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--kernels") == 0) kernels = argv[i + 1];
    if (std::strcmp(argv[i], "--evaluations") == 0) evaluations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--compiles") == 0) compiles = std::atoi(argv[i + 1]);
  }
  const std::string source = ReadFile(kernels + "/softmax_rows.cu");
  const std::string plan = ReadFile(kernels + "/softmax_rows.json");
  if (source.empty() || plan.empty()) {
    std::fprintf(stderr, "cannot read softmax_rows.cu/.json under %s; pass --kernels DIR\n",
                 kernels.c_str());
    return 2;
  }
  std::string cache_dir = absl::StrCat("/tmp/kforge-worker-bench-", ::getpid());
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + cache_dir);
  absl::StatusOr<std::unique_ptr<Compiler>> compiler =
      Compiler::Create({}, store.ok() ? store->get() : nullptr);
  if (!compiler.ok()) {
    std::fprintf(stderr, "%s\n", std::string(compiler.status().message()).c_str());
    return 3;
  }

  // Compile latency: cold (a fresh comment changes the cache key) and cached.
  std::vector<double> cold, cached;
  v1::Candidate candidate;
  candidate.set_launch_plan_json(plan);
  for (int i = 0; i < compiles; ++i) {
    candidate.set_source(absl::StrCat(source, "\n// bench variant ", i, " ", ::getpid(), "\n"));
    Clock::time_point t = Clock::now();
    v1::CompileResult r = (*compiler)->Compile(candidate, {});
    cold.push_back(Seconds(t));
    if (r.status() != v1::COMPILE_OK) {
      std::fprintf(stderr, "compile failed: %s\n", r.log().c_str());
      return 1;
    }
  }
  for (int i = 0; i < compiles; ++i) {
    Clock::time_point t = Clock::now();
    (*compiler)->Compile(candidate, {});
    cached.push_back(Seconds(t));
  }

  absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create({});
  if (!evaluator.ok()) return 3;
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = (*evaluator)->GetGpuInfo();
  if (!gpus.ok()) {
    std::fprintf(stderr, "%s\n", std::string(gpus.status().message()).c_str());
    return 3;
  }
  const v1::GpuInfo& gpu = (*gpus)[0];
  std::printf("kforge worker benchmark on %s (%s, %d SMs, copy bandwidth %.0f GB/s)\n\n",
              gpu.name().c_str(), gpu.arch().c_str(), gpu.sm_count(),
              gpu.copy_bandwidth_bytes_per_s() / 1e9);
  std::printf("%-34s %12s %12s\n", "compile latency (NVRTC)", "p50", "p95");
  std::printf("%-34s %10.1f ms %10.1f ms\n", "cold", Percentile(cold, 0.5) * 1e3,
              Percentile(cold, 0.95) * 1e3);
  std::printf("%-34s %10.3f ms %10.3f ms\n\n", "cached", Percentile(cached, 0.5) * 1e3,
              Percentile(cached, 0.95) * 1e3);
  std::printf("%-34s %9s %12s %12s %8s %8s %11s\n", "evaluation (validate + time)", "evals/min",
              "candidate", "eager", "cv", "eager cv", "mode");
  std::fflush(stdout);
  auto print_row = [](const EvalRow& r) {
    std::printf("%-34s %9.1f %9.2f us %9.2f us %8.4f %8.4f %11s\n", r.name.c_str(),
                r.per_minute, r.candidate_s * 1e6, r.eager_s * 1e6, r.cv, r.eager_cv,
                r.mode.c_str());
    std::fflush(stdout);
  };
  // No store: every evaluation really runs.
  EvaluationPipeline pipeline(compiler->get(), evaluator->get(), nullptr);
  at::manual_seed(0);
  print_row(BenchEvaluations(pipeline, "softmax 4096x1024 fp32 (~10 us)",
                             testing::SoftmaxTarget(4096, 1024),
                             Serialize(at::randn({4096, 1024}) * 3), source, plan, evaluations));
  print_row(BenchEvaluations(pipeline, "softmax 131072x2048 fp32 (~1 ms)",
                             testing::SoftmaxTarget(131072, 2048),
                             Serialize(at::randn({131072, 2048}) * 3), source, plan,
                             evaluations));
  std::error_code ec;
  std::filesystem::remove_all(cache_dir, ec);
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
