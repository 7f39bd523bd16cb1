// The serving loop of a kforge-evaluator child: hello frame, then one EvaluatorReply per
// EvaluatorRequest until the supervisor closes the pipe. The GPU work sits behind
// EvaluationBackend so the loop (and the supervisor around it) can be tested with a test
// double on machines without a GPU.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "services/worker/evaluator_protocol.pb.h"

namespace kforge {

class EvaluationBackend {
 public:
  virtual ~EvaluationBackend() = default;
  // Initializes the GPU; the error (e.g. "no CUDA driver/GPU on this machine: ...") is sent
  // to the supervisor as the hello's error.
  virtual absl::StatusOr<v1::GpuInfo> Start() = 0;
  // Evaluates one job. Sets *context_lost when the CUDA context is unusable afterwards (a
  // sticky error); the child then exits after replying.
  virtual v1::EvaluationResult Evaluate(const worker::EvaluateJob& job, bool* context_lost) = 0;
  // Installs the way out after a sticky CUDA error: `reply` sends the result (marked
  // context_lost) and ends the process without returning, before any destructor can touch
  // the broken context. Backends without a CUDA context ignore it.
  virtual void SetContextLostReply(std::function<void(const v1::EvaluationResult&)> reply) {
    (void)reply;
  }
};

// Serves the protocol on `in_fd`/`out_fd`. Returns the process exit code: 0 when the
// supervisor closed the pipe, 3 after a lost context, 2 when the backend could not start.
int RunEvaluatorChild(EvaluationBackend& backend, int in_fd, int out_fd);

// Moves the protocol off stdout: returns a duplicate of fd 1 for the frames and points fd 1
// at stderr, so a library that prints cannot corrupt the stream.
int TakeProtocolStdout();

}  // namespace kforge
