// posix_spawn-based subprocess runner (see subprocess.h).
#include "services/worker/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace kforge {
namespace {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  int* out() { return &fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Spawn attributes and file actions, released on every path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               std::string_view stdin_data,
                                               const SubprocessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("RunSubprocess: empty argv");
  // stdin is a socket so writes can use MSG_NOSIGNAL: a child that dies early must not
  // SIGPIPE the server. All descriptors are close-on-exec; dup2 onto 0/1/2 clears it there.
  int in_pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
    return Errno("socketpair");
  }
  Fd in_parent(in_pair[0]), in_child(in_pair[1]);
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Errno("pipe2");
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Errno("pipe2");
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  SpawnSetup setup;
  posix_spawn_file_actions_adddup2(&setup.actions, in_child.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err_write.get(), STDERR_FILENO);
  if (!options.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_dir.c_str());
  }
  // A fresh process group (so the kill reaches anything it starts), default signal
  // handlers and an empty mask whatever the server's threads have set.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  const absl::Time start = absl::Now();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &setup.actions, &setup.attr, args.data(), environ);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  }
  in_child.Close();
  out_write.Close();
  err_write.Close();
  fcntl(in_parent.get(), F_SETFL, O_NONBLOCK);

  SubprocessResult result;
  const absl::Time deadline = start + options.time_limit;
  size_t written = 0;
  if (stdin_data.empty()) in_parent.Close();
  bool killed = false;
  auto kill_child = [&] {
    if (!killed) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      killed = true;
    }
  };

  while (out_read.get() >= 0 || err_read.get() >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out_read.get() >= 0) fds[n++] = {out_read.get(), POLLIN, 0};
    if (err_read.get() >= 0) fds[n++] = {err_read.get(), POLLIN, 0};
    if (in_parent.get() >= 0) fds[n++] = {in_parent.get(), POLLOUT, 0};
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result.timed_out = true;
      kill_child();
      break;
    }
    int ready = poll(
        fds, n, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000)));
    if (ready < 0 && errno != EINTR) {
      kill_child();
      break;
    }
    char buffer[65536];
    for (int i = 0; i < n && ready > 0; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_parent.get()) {
        ssize_t w = send(in_parent.get(), stdin_data.data() + written, stdin_data.size() - written,
                         MSG_NOSIGNAL);
        if (w > 0) written += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_data.size()) {
          in_parent.Close();  // done, or the child stopped reading
        }
        continue;
      }
      bool is_out = fds[i].fd == out_read.get();
      ssize_t r = read(fds[i].fd, buffer, sizeof(buffer));
      if (r > 0) {
        std::string& sink = is_out ? result.stdout_data : result.stderr_data;
        size_t cap = is_out ? options.max_stdout_bytes : options.max_stderr_bytes;
        size_t take = std::min(static_cast<size_t>(r), cap - std::min(cap, sink.size()));
        sink.append(buffer, take);
        if (is_out && take < static_cast<size_t>(r)) {
          result.stdout_overflow = true;
          kill_child();
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        (is_out ? out_read : err_read).Close();
      }
    }
    if (result.stdout_overflow) break;
  }
  in_parent.Close();

  // The pipes are closed; the child is exiting (or hung after closing them: the deadline
  // still applies).
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (absl::Now() >= deadline && !killed) {
      result.timed_out = true;
      kill_child();
    }
    if (killed) {
      waitpid(pid, &status, 0);
      break;
    }
    usleep(2000);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  result.wall_time = absl::Now() - start;
  return result;
}

}  // namespace kforge
