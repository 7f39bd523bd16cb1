// Serving a bound httplib::Server on a background thread.
#pragma once

#include <chrono>
#include <thread>

#include "httplib.h"

namespace kforge {

// Starts `server.listen_after_bind()` on a thread and returns once it accepts, so that a
// stop() right after (a short test, a failed start-up) cannot come before the accept loop:
// httplib's stop() does nothing to a server not yet running, and its thread would never end.
inline std::thread ListenInBackground(httplib::Server& server) {
  std::thread thread([&server] { server.listen_after_bind(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return thread;
}

}  // namespace kforge
