// SimulatedEvaluator — TEST-ONLY deterministic stand-in for the GPU evaluator (see header).
#include "services/worker/simulated_evaluator.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/digest.h"

namespace kforge {
namespace {

constexpr char kGpuName[] = "Simulated GPU (test-only)";
constexpr char kNote[] =
    "SimulatedEvaluator (test-only): verdict and timing are a deterministic function of the "
    "kernel's parameters, not a measurement";

// A number in [0, 1) from the sha256 of `text`.
double Unit(const std::string& text) {
  const std::string hex = Sha256Hex(text);
  return static_cast<double>(std::stoull(hex.substr(0, 13), nullptr, 16)) /
         static_cast<double>(1ULL << 52);
}

v1::Timing SimulatedTiming(double median_s) {
  v1::Timing timing;
  timing.set_median_s(median_s);
  timing.set_ci_low_s(median_s * 0.99);
  timing.set_ci_high_s(median_s * 1.01);
  timing.set_cv(0.01);
  timing.set_reps(100);
  timing.set_mode("simulated");
  return timing;
}

}  // namespace

v1::GpuInfo SimulatedEvaluator::Gpu() const {
  v1::GpuInfo gpu;
  gpu.set_name(kGpuName);
  gpu.set_arch(arch_);
  gpu.set_sm_count(132);
  gpu.set_memory_bytes(int64_t{80} << 30);
  gpu.set_l2_bytes(int64_t{50} << 20);
  gpu.set_shared_memory_per_block_optin(227 * 1024);
  gpu.set_copy_bandwidth_bytes_per_s(3.0e12);
  gpu.set_peak_flops(6.0e13);
  gpu.set_index(0);
  return gpu;
}

double SimulatedEvaluator::SimulatedSpeedup(const v1::Target& target,
                                            const v1::Candidate& candidate) {
  // Sorted, so the result does not depend on the map's order.
  std::map<std::string, std::string> params(candidate.params().begin(), candidate.params().end());
  double sum = 0;
  for (const auto& [key, value] : params) {
    sum += Unit(absl::StrCat("param\n", target.id(), "\n", key, "=", value));
  }
  const double mean =
      params.empty()
          ? Unit(absl::StrCat("source\n", target.id(), "\n", Sha256Hex(candidate.source())))
          : sum / static_cast<double>(params.size());
  return 0.5 + 2.5 * std::pow(mean, 1.5);
}

v1::EvaluationResult SimulatedEvaluator::Evaluate(const v1::EvaluateRequest& request,
                                                  const v1::CompileResult& compiled) const {
  v1::EvaluationResult result;
  result.set_policy_version(request.policy().version());
  result.set_gpu_name(kGpuName);
  result.mutable_diagnostics()->set_message(kNote);
  if (compiled.kernels_size() > 0) *result.mutable_resources() = compiled.kernels(0);
  if (Unit(absl::StrCat("verdict\n", request.candidate().id())) < 1.0 / 16) {
    result.set_verdict(v1::MISMATCH);
    result.mutable_diagnostics()->set_input_set("captured");
    result.mutable_diagnostics()->set_max_abs_error(1.0);
    return result;
  }
  result.set_verdict(v1::PASS);
  if (!request.timing()) return result;
  const double eager_s =
      request.target().eager_time_s() > 0 ? request.target().eager_time_s() : 1e-4;
  const double speedup = SimulatedSpeedup(request.target(), request.candidate());
  *result.mutable_eager() = SimulatedTiming(eager_s);
  *result.mutable_candidate() = SimulatedTiming(eager_s / speedup);
  result.set_speedup(speedup);
  result.set_floor_s(request.target().floor_s());
  return result;
}

}  // namespace kforge
