// RedisServerProcess: fork/exec redis-server, poll PING, SIGKILL on Stop.
#include "tests/support/redis_server.h"

#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

constexpr const char* kRedisServer = "/usr/bin/redis-server";

bool Pings(int port) {
  timeval timeout{0, 200'000};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, timeout);
  bool ok = false;
  if (context != nullptr && context->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (context != nullptr) redisFree(context);
  return ok;
}

}  // namespace

RedisServerProcess::RedisServerProcess() : port_(FreeLoopbackPort()) { status_ = Start(); }

RedisServerProcess::~RedisServerProcess() { Stop(); }

absl::Status RedisServerProcess::Start() {
  if (pid_ > 0) return absl::OkStatus();
  if (access(kRedisServer, X_OK) != 0) {
    return status_ = absl::FailedPreconditionError(
               absl::StrCat(kRedisServer, " is missing; install the redis-server package"));
  }
  std::vector<std::string> args = {kRedisServer,   "--port",      std::to_string(port_),
                                   "--bind",       "127.0.0.1",   "--save",
                                   "",             "--appendonly", "no",
                                   "--dir",        dir_.str(),    "--maxmemory",
                                   "256mb",        "--maxmemory-policy", "allkeys-lru",
                                   "--logfile",    (dir_ / "redis.log").string()};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return status_ = absl::InternalError("fork failed");
  if (pid == 0) {
    // A test that crashes never runs the destructor: the server dies with it instead of
    // living on, and it never holds the test's stdout, because CTest waits for that pipe
    // to close and a leaked holder hangs the whole run.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null_fd = open("/dev/null", O_RDWR);
    for (int fd = 0; fd <= 2; ++fd) dup2(null_fd, fd);
    execv(kRedisServer, argv.data());
    _exit(127);
  }
  pid_ = pid;
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (Pings(port_)) return status_ = absl::OkStatus();
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return status_ = absl::InternalError(absl::StrCat(
                 "redis-server exited during startup on port ", port_, "; see ",
                 (dir_ / "redis.log").string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  Stop();
  return status_ = absl::DeadlineExceededError(
             absl::StrCat("redis-server on port ", port_, " did not answer PING"));
}

void RedisServerProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace kforge
