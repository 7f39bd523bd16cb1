// The kforge-evaluator child's serving loop.
#include "services/worker/evaluator_child.h"

#include <unistd.h>

#include <cstdio>

#include "absl/status/status.h"
#include "services/worker/evaluator_protocol.h"

namespace kforge {

int TakeProtocolStdout() {
  std::fflush(stdout);
  int protocol_fd = ::dup(1);
  ::dup2(2, 1);
  return protocol_fd;
}

int RunEvaluatorChild(EvaluationBackend& backend, int in_fd, int out_fd) {
  worker::EvaluatorHello hello;
  absl::StatusOr<v1::GpuInfo> gpu = backend.Start();
  if (gpu.ok()) {
    *hello.mutable_gpu() = *gpu;
  } else {
    hello.set_error(std::string(gpu.status().message()));
  }
  if (!WriteFrame(out_fd, hello).ok() || !gpu.ok()) return 2;

  backend.SetContextLostReply([out_fd](const v1::EvaluationResult& result) {
    worker::EvaluatorReply reply;
    *reply.mutable_result() = result;
    reply.set_context_lost(true);
    (void)WriteFrame(out_fd, reply);
    ::_exit(3);
  });
  while (true) {
    worker::EvaluatorRequest request;
    absl::Status read = ReadFrame(in_fd, &request);
    if (absl::IsUnavailable(read)) return 0;  // the supervisor closed the pipe
    worker::EvaluatorReply reply;
    bool context_lost = false;
    if (!read.ok()) {
      reply.mutable_result()->set_verdict(v1::NOT_EVALUATED);
      reply.mutable_result()->mutable_diagnostics()->set_message(
          std::string(read.message()));
    } else {
      *reply.mutable_result() = backend.Evaluate(request.evaluate(), &context_lost);
    }
    reply.set_context_lost(context_lost);
    if (!WriteFrame(out_fd, reply).ok()) return 0;
    // Skip static destructors: they would touch the broken CUDA context.
    if (context_lost) ::_exit(3);
  }
}

}  // namespace kforge
