// TransformersServeProcess: a real OpenAI-compatible server not written here, for testing the
// LLM client end to end: Hugging Face's `transformers serve` (FastAPI + uvicorn) as a child
// process on a free loopback port, serving a tiny random-weight chat model that
// write_tiny_chat_model.py writes into a temporary directory. Fully offline.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/temp_dir.h"

namespace kforge::testing {

class TransformersServeProcess {
 public:
  // `python`: the interpreter that holds transformers and its serving packages; `script`:
  // write_tiny_chat_model.py.
  TransformersServeProcess(std::string python, std::string script);
  ~TransformersServeProcess();
  TransformersServeProcess(const TransformersServeProcess&) = delete;
  TransformersServeProcess& operator=(const TransformersServeProcess&) = delete;

  // The serving packages `python` lacks ("fastapi, uvicorn"), empty when all are there; an
  // error when `python` cannot even be asked. tools/setup installs them.
  absl::StatusOr<std::string> MissingPackages();

  // Writes the model, starts the server pinned to it and waits until /health answers 200
  // (the model is loaded before the server listens). Errors carry the end of the server log.
  absl::Status Start(absl::Duration timeout);
  // SIGTERM to the server's process group, SIGKILL if it has not exited within 10 s.
  void Stop();

  std::string base_url() const;  // http://127.0.0.1:PORT/v1
  std::string origin() const;    // http://127.0.0.1:PORT
  int port() const { return port_; }
  // The name requests must carry: the server is pinned to this model directory.
  std::string model() const { return (dir_ / "model").string(); }
  // The last `bytes` of the server's stdout and stderr.
  std::string LogTail(size_t bytes = 4000) const;

 private:
  bool Alive();

  std::string python_;
  std::string script_;
  TempDir dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace kforge::testing
