// Evaluator: validates and times compiled candidates on this machine's GPUs. It owns no CUDA
// context itself: each GPU is served by a kforge-evaluator child process (LibTorch + the CUDA
// driver) that it supervises, so a candidate that hangs, crashes or corrupts its context
// costs a child restart, never the worker. Every problem comes back as a verdict.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/worker.pb.h"

namespace kforge {

struct EvaluatorOptions {
  // The child executable; empty: kforge-evaluator beside the running executable, else PATH.
  std::string evaluator_path;
  // Extra arguments for every child (tests use them to pick a test double's behaviour).
  std::vector<std::string> child_args;
  // GPU indices (as this process sees them), one child each.
  std::vector<int> gpus = {0};
  // Per-candidate limit (validation + timing) when the policy sets none.
  double default_time_limit_s = 60;
  // A child's start: CUDA and LibTorch initialization plus the copy-bandwidth measurement.
  double startup_timeout_s = 300;
  // compute-sanitizer for policy.compute_sanitizer; empty: PATH, then /usr/local/cuda/bin.
  std::string compute_sanitizer_path;
};

// What one evaluation cost, for metrics.
struct EvaluationEvent {
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
  double busy_s = 0;        // time the GPU slot was held
  bool child_restarted = false;  // the child died or was killed and will be restarted
};

class Evaluator {
 public:
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(EvaluatorOptions options);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Validates (and, with request.timing, times) `compiled` — a COMPILE_OK result for
  // request.candidate — against request.target on `captured_inputs` (torch.save bytes of
  // one real call). Waits for a free GPU. Never fails: a hang is TIMEOUT, a dead child
  // CRASH, a machine without a CUDA GPU NOT_EVALUATED, each with diagnostics.
  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const v1::CompileResult& compiled,
                                const std::string& captured_inputs);

  // Properties of each GPU (starting its child if needed). An error says why no GPU could
  // be used, e.g. "no CUDA driver/GPU on this machine: ...".
  absl::StatusOr<std::vector<v1::GpuInfo>> GetGpuInfo();

  // Children that died or were killed (and so will be restarted) since Create.
  int64_t restarts() const { return restarts_.load(); }

  // Called after every evaluation (from the evaluating thread).
  void SetObserver(std::function<void(const EvaluationEvent&)> observer);

 private:
  struct Slot;
  class ChildProcess;

  explicit Evaluator(EvaluatorOptions options);
  Slot& AcquireSlot();
  void ReleaseSlot(Slot& slot);
  // Starts the slot's child unless it runs; on failure fills `why` (a NOT_EVALUATED result).
  bool EnsureChild(Slot& slot, bool sanitizer, v1::EvaluationResult* why);
  v1::EvaluationResult EvaluateOnSlot(Slot& slot, const v1::EvaluateRequest& request,
                                      const v1::CompileResult& compiled,
                                      const std::string& captured_inputs, bool* restarted);

  EvaluatorOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex mu_;
  std::condition_variable slot_freed_;
  std::atomic<int64_t> restarts_{0};
  std::function<void(const EvaluationEvent&)> observer_;
};

// The validation policy kforge applies unless told otherwise (DESIGN.md): 3 random input
// sets, k = 4, no sanitizer, 60 s per candidate. `version` names the rules' revision and is
// part of every evaluation cache key.
inline constexpr char kValidationPolicyVersion[] = "kforge-validation-1";
v1::ValidationPolicy DefaultValidationPolicy();

// The message every NOT_EVALUATED result carries on a machine without a usable CUDA driver.
inline constexpr char kNoGpuMessage[] =
    "no CUDA driver/GPU on this machine: validation and timing need a CUDA GPU";

}  // namespace kforge
