// kforge-nvrtc: compiles one candidate with NVRTC under resource limits, in its own process,
// so a compile bomb or an NVRTC crash costs only this process. Protocol: a serialized
// kforge.v1.CompileRequest on stdin (source already canonical and checked, options
// normalized), a serialized kforge.v1.CompileResult on stdout, diagnostics on stderr.
//
//   kforge-nvrtc [--cuda-include-dir DIR] [--memory-limit-bytes N] [--cpu-limit-seconds N]
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "kforge/v1/worker.pb.h"
#include "services/worker/nvrtc_compile.h"

namespace {

void SetLimit(int resource, rlim_t soft, rlim_t hard, const char* name) {
  rlimit limit{soft, hard};
  if (setrlimit(resource, &limit) != 0) {
    std::fprintf(stderr, "kforge-nvrtc: setrlimit(%s) failed: %s\n", name, std::strerror(errno));
    std::exit(3);
  }
}

bool ReadAll(int fd, std::string* out) {
  char buffer[65536];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buffer, static_cast<size_t>(n));
  }
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string include_dir;
  long long memory_limit = 0, cpu_seconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i + 1 < argc && arg == "--cuda-include-dir") {
      include_dir = argv[++i];
    } else if (i + 1 < argc && arg == "--memory-limit-bytes") {
      memory_limit = std::atoll(argv[++i]);
    } else if (i + 1 < argc && arg == "--cpu-limit-seconds") {
      cpu_seconds = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "kforge-nvrtc: unknown argument '%s'. This is the worker's compiler child; "
                   "run `kforge compile` instead.\n",
                   argv[i]);
      return 2;
    }
  }
  // Limits first, before NVRTC allocates anything. No core files: a crash is reported by
  // the parent from the exit signal and stderr.
  SetLimit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE");
  if (memory_limit > 0) SetLimit(RLIMIT_AS, memory_limit, memory_limit, "RLIMIT_AS");
  if (cpu_seconds > 0) SetLimit(RLIMIT_CPU, cpu_seconds, cpu_seconds + 1, "RLIMIT_CPU");

  std::string input;
  kforge::v1::CompileRequest request;
  if (!ReadAll(STDIN_FILENO, &input) || !request.ParseFromString(input)) {
    std::fprintf(stderr, "kforge-nvrtc: could not read a CompileRequest from stdin\n");
    return 2;
  }
  kforge::v1::CompileResult result =
      kforge::CompileWithNvrtc(request.candidate().source(), request.options(), include_dir);
  std::string output;
  if (!result.SerializeToString(&output) || !WriteAll(STDOUT_FILENO, output)) {
    std::fprintf(stderr, "kforge-nvrtc: could not write the result: %s\n", std::strerror(errno));
    return 2;
  }
  return 0;
}
