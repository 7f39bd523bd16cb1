// fake-evaluator-child: a TEST DOUBLE of kforge-evaluator for machines without a GPU. It runs
// the real serving loop (RunEvaluatorChild) over FakeMisbehavingBackend, which stands in for a
// candidate kernel that misbehaves, so the supervisor's kill-on-timeout, crash detection and
// restart are tested for real. The behaviour is chosen per request by the word after "fake:"
// in the candidate's source (default pass):
//   pass            PASS; the message names this process and a per-process call counter
//   hang            never replies (a kernel stuck in an infinite loop)
//   crash           writes to stderr and aborts (a fault that kills the process)
//   lose-context    replies CRASH with context_lost set (a sticky CUDA error)
//   block:PATH      creates PATH.started, waits until PATH exists, then PASS (holds a GPU
//                   slot in a test)
// Arguments: --gpu-index N (as the supervisor passes), --fail-start (hello carries an error).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/worker/evaluator_child.h"

namespace kforge {
namespace {

class FakeMisbehavingBackend : public EvaluationBackend {
 public:
  FakeMisbehavingBackend(int gpu, bool fail_start) : gpu_(gpu), fail_start_(fail_start) {}

  absl::StatusOr<v1::GpuInfo> Start() override {
    if (fail_start_) {
      return absl::FailedPreconditionError("FakeGpu test double: refusing to start on purpose");
    }
    v1::GpuInfo info;
    info.set_name("FakeGpu (test double)");
    info.set_arch("sm_90");
    info.set_sm_count(4);
    info.set_index(gpu_);
    return info;
  }

  v1::EvaluationResult Evaluate(const worker::EvaluateJob& job, bool* context_lost) override {
    ++calls_;
    // The behaviour is the word after "fake:" in the source (a comment in a real kernel).
    const std::string& source = job.request().candidate().source();
    size_t marker = source.find("fake:");
    std::string behaviour = "pass";
    if (marker != std::string::npos) {
      size_t end = source.find_first_of(" \n", marker);
      behaviour = source.substr(marker + 5, end == std::string::npos ? end : end - marker - 5);
    }
    v1::EvaluationResult result;
    if (behaviour == "hang") {
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (behaviour == "crash") {
      std::fprintf(stderr, "fake: crashing on purpose\n");
      std::fflush(stderr);
      std::abort();
    }
    if (behaviour == "lose-context") {
      *context_lost = true;
      result.set_verdict(v1::CRASH);
      result.mutable_diagnostics()->set_message("fake: sticky error");
      return result;
    }
    if (absl::StartsWith(behaviour, "block:")) {
      std::string path = behaviour.substr(6);
      std::FILE* started = std::fopen((path + ".started").c_str(), "w");
      if (started != nullptr) std::fclose(started);
      while (!std::filesystem::exists(path)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    result.set_verdict(v1::PASS);
    result.mutable_diagnostics()->set_message(
        absl::StrCat("pid=", ::getpid(), " visible=", visible ? visible : "", " calls=", calls_,
                     " inputs=", job.captured_inputs().size()));
    return result;
  }

 private:
  int gpu_;
  bool fail_start_;
  int calls_ = 0;
};

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  int gpu = 0;
  bool fail_start = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu-index") == 0 && i + 1 < argc) {
      gpu = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--fail-start") == 0) {
      fail_start = true;
    }
  }
  int out = kforge::TakeProtocolStdout();
  kforge::FakeMisbehavingBackend backend(gpu, fail_start);
  return kforge::RunEvaluatorChild(backend, STDIN_FILENO, out);
}
