// kforge-evaluator: the child process that owns one GPU's CUDA context for the worker's
// Evaluator. Speaks length-prefixed frames on stdin/stdout (evaluator_protocol.proto); not
// meant to be run by hand. Usage: kforge-evaluator [--gpu-index N]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "services/worker/evaluator_child.h"
#include "services/worker/evaluator_cuda_backend.h"

int main(int argc, char** argv) {
  int gpu_index = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu-index") == 0 && i + 1 < argc) {
      gpu_index = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "kforge-evaluator: unknown argument '%s'. It is started by the worker's "
                   "Evaluator: kforge-evaluator [--gpu-index N]\n",
                   argv[i]);
      return 2;
    }
  }
  int protocol_out = kforge::TakeProtocolStdout();
  std::unique_ptr<kforge::EvaluationBackend> backend =
      kforge::MakeCudaEvaluationBackend(gpu_index);
  return kforge::RunEvaluatorChild(*backend, STDIN_FILENO, protocol_out);
}
