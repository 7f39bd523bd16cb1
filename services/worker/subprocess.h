// RunSubprocess: runs a program with posix_spawn (safe in a multi-threaded server, unlike
// fork), feeds it stdin, collects stdout/stderr and kills its process group at a deadline.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kforge {

struct SubprocessOptions {
  absl::Duration time_limit = absl::Seconds(60);  // wall time; then SIGKILL
  std::string working_dir;                        // empty: inherit
  size_t max_stdout_bytes = size_t{512} << 20;    // more: killed, stdout_overflow
  size_t max_stderr_bytes = size_t{64} << 10;     // more: the rest is dropped
};

struct SubprocessResult {
  bool timed_out = false;
  bool stdout_overflow = false;
  int exit_code = -1;   // when it exited normally
  int term_signal = 0;  // when a signal ended it
  std::string stdout_data;
  std::string stderr_data;
  absl::Duration wall_time;
};

// An error only when the program could not be started; everything after that (nonzero
// exit, signal, timeout) is in the result.
absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               std::string_view stdin_data,
                                               const SubprocessOptions& options);

}  // namespace kforge
