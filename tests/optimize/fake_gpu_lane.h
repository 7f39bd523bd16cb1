// TEST DOUBLES for the EmbeddedRunner's pool tests: a GPU lane that records how many
// evaluations run on it at once and answers with a configured verdict, and a compile function
// that needs no NVRTC. They stand in for a GPU (there is none here) so that the pool's own
// logic — one evaluation per GPU at a time, every GPU used, failures as data — can be pinned.
// Never use them outside tests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/coordinator/embedded/gpu_lane.h"

namespace kforge::testing {

// Shared by every fake lane of a test: how many evaluations run across lanes right now.
struct FakeGpuPool {
  std::mutex mu;
  std::condition_variable changed;
  int active = 0;
  int max_active = 0;
  bool gate_open = true;  // closed: evaluations wait until the test opens it
  int started = 0;
};

class FakeGpuLaneForTests : public GpuLane {
 public:
  FakeGpuLaneForTests(int index, FakeGpuPool* pool) : index_(index), pool_(pool) {}

  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const std::string& captured_inputs) override {
    const int now_here = ++active_here_;
    int seen = max_here_.load();
    while (now_here > seen && !max_here_.compare_exchange_weak(seen, now_here)) {
    }
    {
      std::unique_lock<std::mutex> lock(pool_->mu);
      ++pool_->active;
      ++pool_->started;
      pool_->max_active = std::max(pool_->max_active, pool_->active);
      requests_.push_back(request);
      inputs_.push_back(captured_inputs);
      pool_->changed.notify_all();
      // Hold the GPU a moment, or until the gate opens, so overlapping work is visible.
      pool_->changed.wait_for(lock, std::chrono::milliseconds(hold_ms), [&] {
        return pool_->gate_open && pool_->max_active >= overlap_wanted;
      });
      pool_->changed.wait(lock, [&] { return pool_->gate_open; });
      --pool_->active;
    }
    --active_here_;
    v1::EvaluationResult result;
    result.set_verdict(verdict);
    if (verdict == v1::PASS) {
      result.set_speedup(1.5);
      result.mutable_candidate()->set_median_s(1e-5);
      result.mutable_eager()->set_median_s(1.5e-5);
    } else {
      result.mutable_diagnostics()->set_message("fake lane verdict");
    }
    result.set_reconfirmed(request.fresh_process());
    result.set_gpu_name(Name());
    return result;
  }

  std::string Name() const override { return absl::StrCat("FakeGPU ", index_); }

  int max_concurrent_here() const { return max_here_.load(); }
  std::vector<v1::EvaluateRequest> requests() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    return requests_;
  }
  std::vector<std::string> inputs() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    return inputs_;
  }

  v1::Verdict verdict = v1::PASS;
  int hold_ms = 20;
  int overlap_wanted = 1;

 private:
  int index_;
  FakeGpuPool* pool_;
  std::atomic<int> active_here_{0};
  std::atomic<int> max_here_{0};
  std::vector<v1::EvaluateRequest> requests_;
  std::vector<std::string> inputs_;
};

// Compile test double: candidates whose id starts with "bad" fail, the rest "compile".
inline v1::CompileResult FakeCompileForTests(const v1::Candidate& candidate,
                                             const v1::CompileOptions& options) {
  v1::CompileResult result;
  result.set_arch(options.arch());
  if (absl::StartsWith(candidate.id(), "bad")) {
    result.set_status(v1::COMPILE_FAILED);
    result.set_log("error: fake compile failure");
    return result;
  }
  result.set_status(v1::COMPILE_OK);
  result.set_cubin(absl::StrCat("cubin-of-", candidate.id()));
  return result;
}

}  // namespace kforge::testing
