// RedisServerProcess: a real /usr/bin/redis-server on a free loopback port, for
// integration tests of anything that talks to Redis.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace kforge {

// Starts on construction (check status()); the destructor kills it. Stop() and Start()
// restart it on the same port, to test reconnects. No persistence, 256 MB allkeys-lru,
// like the deployed cache. The server also dies with the thread that started it.
class RedisServerProcess {
 public:
  RedisServerProcess();
  ~RedisServerProcess();
  RedisServerProcess(const RedisServerProcess&) = delete;
  RedisServerProcess& operator=(const RedisServerProcess&) = delete;

  // Result of the start in the constructor (or of the last Start()).
  const absl::Status& status() const { return status_; }
  // Starts the server (no-op while running) and waits until it answers PING.
  absl::Status Start();
  // Kills the server and waits for it to exit.
  void Stop();
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  TempDir dir_;
  int port_;
  pid_t pid_ = -1;
  absl::Status status_;
};

}  // namespace kforge
