// Evaluator: supervises one kforge-evaluator child per GPU (spawn, time limit, crash
// detection, restart) and turns whatever happens to a child into a verdict.
#include "services/worker/evaluator.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "services/worker/evaluator_protocol.h"
#include "services/worker/evaluator_protocol.pb.h"

extern char** environ;

namespace kforge {
namespace {

constexpr size_t kStderrTailBytes = 64 * 1024;
constexpr size_t kExcerptBytes = 4096;

std::string Tail(const std::string& text, size_t bytes) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return absl::StrCat("killed by signal ", sig, " (", name ? name : "?", ")");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  return "ended";
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string DefaultEvaluatorPath() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path beside = self.parent_path() / "kforge-evaluator";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  std::string on_path = FindOnPath("kforge-evaluator");
  return on_path.empty() ? "kforge-evaluator" : on_path;
}

// The CUDA_VISIBLE_DEVICES value that shows the child only GPU `index` of this process.
std::string VisibleDeviceFor(int index) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && *visible != '\0') {
    std::vector<std::string> ids = absl::StrSplit(visible, ',', absl::SkipEmpty());
    if (index >= 0 && index < static_cast<int>(ids.size())) return ids[index];
  }
  return std::to_string(index);
}

v1::EvaluationResult Failed(v1::Verdict verdict, std::string message, std::string log = "") {
  v1::EvaluationResult result;
  result.set_verdict(verdict);
  result.mutable_diagnostics()->set_message(std::move(message));
  if (!log.empty()) result.mutable_diagnostics()->set_log_excerpt(Tail(log, kExcerptBytes));
  return result;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

v1::ValidationPolicy DefaultValidationPolicy() {
  v1::ValidationPolicy policy;
  policy.set_random_input_sets(3);
  policy.set_eager_error_factor(4);
  policy.set_compute_sanitizer(false);
  policy.set_time_limit_s(60);
  policy.set_version(kValidationPolicyVersion);
  return policy;
}

// One child process with pipes on its stdin/stdout and its stderr collected by a thread.
class Evaluator::ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
        ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("evaluator: cannot create pipes: ", std::strerror(errno)));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Own process group, so a kill also reaches compute-sanitizer's target process.
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

    std::vector<char*> c_argv, c_env;
    for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    for (const std::string& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
    c_env.push_back(nullptr);
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (rc != 0) {
      ::close(in_pipe[1]);
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      return absl::FailedPreconditionError(absl::StrCat(
          "evaluator: cannot start '", argv[0], "': ", std::strerror(rc),
          "; build the kforge-evaluator target or pass its path"));
    }
    auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
    child->pid_ = pid;
    child->in_fd_ = in_pipe[1];
    child->out_fd_ = out_pipe[0];
    child->err_fd_ = err_pipe[0];
    child->stderr_reader_ = std::thread([c = child.get()] { c->CollectStderr(); });
    return child;
  }

  ~ChildProcess() {
    Kill();
    if (in_fd_ >= 0) ::close(in_fd_);
    if (out_fd_ >= 0) ::close(out_fd_);
    if (stderr_reader_.joinable()) stderr_reader_.join();
    if (err_fd_ >= 0) ::close(err_fd_);
  }

  int in_fd() const { return in_fd_; }
  int out_fd() const { return out_fd_; }

  // Closes the child's stdin: a healthy child then exits.
  void CloseInput() {
    if (in_fd_ >= 0) ::close(in_fd_);
    in_fd_ = -1;
  }

  // SIGKILL to the whole process group, then reap. Idempotent.
  void Kill() {
    if (reaped_) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    Reap(std::nullopt);
  }

  // Waits for the child to end (at most `wait`, if given); true once it has been reaped.
  bool Reap(std::optional<absl::Duration> wait) {
    if (reaped_) return true;
    absl::Time deadline = wait ? absl::Now() + *wait : absl::InfiniteFuture();
    while (true) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, wait ? WNOHANG : 0);
      if (r == pid_) {
        reaped_ = true;
        status_ = status;
        return true;
      }
      if (r < 0 && errno != EINTR) {
        reaped_ = true;  // not our child any more (cannot happen unless reaped elsewhere)
        return true;
      }
      if (wait && absl::Now() >= deadline) return false;
      if (wait) absl::SleepFor(absl::Milliseconds(10));
    }
  }

  // How the child ended, after Reap.
  std::string ExitDescription() const { return DescribeExit(status_); }
  bool ExitedWithCode(int code) const {
    return reaped_ && WIFEXITED(status_) && WEXITSTATUS(status_) == code;
  }

  // The last bytes the child wrote to stderr. Waits briefly for the reader to drain it when
  // the child has ended.
  std::string StderrTail() {
    if (reaped_ && stderr_reader_.joinable()) {
      absl::Time until = absl::Now() + absl::Seconds(2);
      while (!stderr_done_.load() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(stderr_mu_);
    return stderr_;
  }

 private:
  ChildProcess() = default;

  void CollectStderr() {
    char buf[4096];
    while (true) {
      ssize_t n = ::read(err_fd_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      std::lock_guard<std::mutex> lock(stderr_mu_);
      stderr_.append(buf, static_cast<size_t>(n));
      if (stderr_.size() > 2 * kStderrTailBytes) stderr_ = Tail(stderr_, kStderrTailBytes);
    }
    stderr_done_ = true;
  }

  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::thread stderr_reader_;
  std::mutex stderr_mu_;
  std::string stderr_;
  std::atomic<bool> stderr_done_{false};
};

struct Evaluator::Slot {
  int gpu = 0;
  bool busy = false;
  std::unique_ptr<ChildProcess> child;
  bool child_sanitized = false;
  std::string sanitizer_log;  // compute-sanitizer's report file of a sanitized child
  v1::GpuInfo info;
  bool has_info = false;
};

Evaluator::Evaluator(EvaluatorOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(EvaluatorOptions options) {
  if (options.gpus.empty()) {
    return absl::InvalidArgumentError("evaluator: no GPUs given; pass at least one index (0)");
  }
  for (int gpu : options.gpus) {
    if (gpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("evaluator: GPU index ", gpu, " is negative"));
    }
  }
  if (options.evaluator_path.empty()) options.evaluator_path = DefaultEvaluatorPath();
  // A child that dies while we write its request must not take the worker with it.
  ::signal(SIGPIPE, SIG_IGN);
  auto evaluator = std::unique_ptr<Evaluator>(new Evaluator(std::move(options)));
  for (int gpu : evaluator->options_.gpus) {
    auto slot = std::make_unique<Slot>();
    slot->gpu = gpu;
    evaluator->slots_.push_back(std::move(slot));
  }
  return evaluator;
}

Evaluator::~Evaluator() {
  for (auto& slot : slots_) slot->child.reset();
}

void Evaluator::SetObserver(std::function<void(const EvaluationEvent&)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

Evaluator::Slot& Evaluator::AcquireSlot() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    for (auto& slot : slots_) {
      if (!slot->busy) {
        slot->busy = true;
        return *slot;
      }
    }
    slot_freed_.wait(lock);
  }
}

void Evaluator::ReleaseSlot(Slot& slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot.busy = false;
  }
  slot_freed_.notify_all();
}

bool Evaluator::EnsureChild(Slot& slot, bool sanitizer, v1::EvaluationResult* why) {
  if (slot.child && slot.child_sanitized == sanitizer) return true;
  slot.child.reset();

  std::vector<std::string> argv;
  slot.sanitizer_log.clear();
  if (sanitizer) {
    std::string tool = options_.compute_sanitizer_path;
    if (tool.empty()) tool = FindOnPath("compute-sanitizer");
    if (tool.empty() && ::access("/usr/local/cuda/bin/compute-sanitizer", X_OK) == 0) {
      tool = "/usr/local/cuda/bin/compute-sanitizer";
    }
    if (tool.empty()) {
      *why = Failed(v1::NOT_EVALUATED,
                    "policy.compute_sanitizer is set but compute-sanitizer is not on PATH or in "
                    "/usr/local/cuda/bin; install the CUDA toolkit's sanitizer or turn the "
                    "policy off");
      return false;
    }
    slot.sanitizer_log = absl::StrFormat("%s/kforge-sanitizer-%d-%d.log",
                                         std::filesystem::temp_directory_path().string(),
                                         static_cast<int>(::getpid()), slot.gpu);
    std::filesystem::remove(slot.sanitizer_log);
    argv = {tool, "--tool", "memcheck", "--error-exitcode", "99", "--log-file",
            slot.sanitizer_log};
  }
  argv.push_back(options_.evaluator_path);
  argv.push_back("--gpu-index");
  argv.push_back(std::to_string(slot.gpu));
  for (const std::string& a : options_.child_args) argv.push_back(a);

  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) continue;
    env.emplace_back(*e);
  }
  env.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES=", VisibleDeviceFor(slot.gpu)));
  // Under memcheck every tensor must be its own allocation: the caching allocator's large
  // segments would hide accesses past a buffer's end from the sanitizer.
  if (sanitizer) env.push_back("PYTORCH_NO_CUDA_MEMORY_CACHING=1");

  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(argv, env);
  if (!child.ok()) {
    *why = Failed(v1::NOT_EVALUATED, std::string(child.status().message()));
    return false;
  }
  worker::EvaluatorHello hello;
  absl::Status read = ReadFrame((*child)->out_fd(), &hello,
                                absl::Now() + absl::Seconds(options_.startup_timeout_s));
  if (read.ok() && hello.error().empty()) {
    slot.child = *std::move(child);
    slot.child_sanitized = sanitizer;
    slot.info = hello.gpu();
    slot.info.set_index(slot.gpu);
    slot.has_info = true;
    return true;
  }
  if (!read.ok() && absl::IsDeadlineExceeded(read)) (*child)->Kill();
  (*child)->Reap(absl::Seconds(10));
  (*child)->Kill();
  std::string log = (*child)->StderrTail();
  if (read.ok()) {
    *why = Failed(v1::NOT_EVALUATED, hello.error(), log);
  } else if (absl::IsDeadlineExceeded(read)) {
    *why = Failed(v1::NOT_EVALUATED,
                  absl::StrFormat("the evaluator for GPU %d did not start within %.0f s; see "
                                  "the log excerpt",
                                  slot.gpu, options_.startup_timeout_s),
                  log);
  } else if ((*child)->ExitedWithCode(127) || log.find("libcuda.so") != std::string::npos ||
             log.find("error while loading shared libraries") != std::string::npos) {
    *why = Failed(v1::NOT_EVALUATED, kNoGpuMessage, log);
  } else {
    *why = Failed(v1::NOT_EVALUATED,
                  absl::StrCat("the evaluator for GPU ", slot.gpu, " failed to start (",
                               (*child)->ExitDescription(), "); see the log excerpt"),
                  log);
  }
  return false;
}

v1::EvaluationResult Evaluator::EvaluateOnSlot(Slot& slot, const v1::EvaluateRequest& request,
                                               const v1::CompileResult& compiled,
                                               const std::string& captured_inputs,
                                               bool* restarted) {
  const bool sanitizer = request.policy().compute_sanitizer();
  // A winner is re-confirmed in a process that has run nothing else; sanitized runs get a
  // process of their own so the sanitizer's verdict belongs to this candidate alone.
  if (request.fresh_process() || sanitizer) slot.child.reset();
  v1::EvaluationResult why;
  if (!EnsureChild(slot, sanitizer, &why)) return why;

  worker::EvaluatorRequest frame;
  worker::EvaluateJob* job = frame.mutable_evaluate();
  *job->mutable_request() = request;
  // Under the sanitizer kernels run many times slower: validate, do not time.
  if (sanitizer) job->mutable_request()->set_timing(false);
  *job->mutable_compiled() = compiled;
  job->set_captured_inputs(captured_inputs);

  double limit_s = request.policy().time_limit_s() > 0 ? request.policy().time_limit_s()
                                                       : options_.default_time_limit_s;
  if (sanitizer) limit_s *= 20;
  ChildProcess& child = *slot.child;
  worker::EvaluatorReply reply;
  absl::Status io = WriteFrame(child.in_fd(), frame);
  if (io.ok()) io = ReadFrame(child.out_fd(), &reply, absl::Now() + absl::Seconds(limit_s));

  v1::EvaluationResult result;
  // A child that ended (or must end) leaves the slot; a sanitized one always does.
  std::unique_ptr<ChildProcess> ended;
  if (io.ok()) {
    result = reply.result();
    if (reply.context_lost()) {
      child.Reap(absl::Seconds(30));
      ended = std::move(slot.child);
      *restarted = true;
    }
  } else if (absl::IsDeadlineExceeded(io)) {
    child.Kill();
    result = Failed(v1::TIMEOUT,
                    absl::StrFormat("the candidate did not finish within the %.3g s time limit "
                                    "(validation%s); the evaluator process was killed and "
                                    "restarted",
                                    limit_s, request.timing() ? " and timing" : ""),
                    child.StderrTail());
    ended = std::move(slot.child);
    *restarted = true;
  } else {
    child.Reap(absl::Seconds(30));
    child.Kill();
    result = Failed(v1::CRASH,
                    absl::StrCat("the evaluator process ", child.ExitDescription(),
                                 " while running the candidate; it was restarted"),
                    child.StderrTail());
    ended = std::move(slot.child);
    *restarted = true;
  }

  if (sanitizer) {
    if (!ended) ended = std::move(slot.child);
    ended->CloseInput();
    ended->Reap(absl::Seconds(120));
    ended->Kill();
    // Whatever happened to the child (a memcheck error can also abort the kernel and with it
    // the process), the sanitizer's report decides.
    std::string report = ReadFileOrEmpty(slot.sanitizer_log);
    size_t summary = report.rfind("ERROR SUMMARY:");
    bool errors = ended->ExitedWithCode(99) ||
                  (summary != std::string::npos &&
                   report.compare(summary, 23, "ERROR SUMMARY: 0 errors") != 0);
    std::string summary_line =
        summary == std::string::npos
            ? absl::StrCat("compute-sanitizer wrote no summary (", ended->ExitDescription(),
                           ")")
            : absl::StrCat("compute-sanitizer memcheck: ",
                           report.substr(summary, report.find('\n', summary) - summary));
    if (errors) {
      std::string earlier = result.diagnostics().message();
      result = Failed(v1::OUT_OF_BOUNDS,
                      absl::StrCat("compute-sanitizer memcheck reported invalid memory accesses",
                                   earlier.empty() ? "" : absl::StrCat(" (the evaluator said: ",
                                                                       earlier, ")")),
                      report.substr(0, kExcerptBytes));
    } else {
      // The sanitizer's verdict travels with every sanitized result, clean ones included.
      std::string log = result.diagnostics().log_excerpt();
      result.mutable_diagnostics()->set_log_excerpt(
          log.empty() ? summary_line : absl::StrCat(log, "\n", summary_line));
    }
  }
  if (slot.has_info && result.gpu_name().empty()) result.set_gpu_name(slot.info.name());
  return result;
}

v1::EvaluationResult Evaluator::Evaluate(const v1::EvaluateRequest& request,
                                         const v1::CompileResult& compiled,
                                         const std::string& captured_inputs) {
  v1::EvaluationResult result;
  if (compiled.status() != v1::COMPILE_OK || compiled.cubin().empty()) {
    result = Failed(v1::COMPILE_ERROR, "the candidate did not compile; see the log excerpt",
                    compiled.log());
  } else {
    Slot& slot = AcquireSlot();
    absl::Time start = absl::Now();
    bool restarted = false;
    result = EvaluateOnSlot(slot, request, compiled, captured_inputs, &restarted);
    double busy_s = absl::ToDoubleSeconds(absl::Now() - start);
    ReleaseSlot(slot);
    if (restarted) restarts_.fetch_add(1);
    std::function<void(const EvaluationEvent&)> observer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      observer = observer_;
    }
    if (observer) observer({result.verdict(), busy_s, restarted});
  }
  result.set_policy_version(request.policy().version());
  result.set_reconfirmed(request.fresh_process());
  return result;
}

absl::StatusOr<std::vector<v1::GpuInfo>> Evaluator::GetGpuInfo() {
  std::vector<v1::GpuInfo> gpus;
  std::string first_error;
  for (auto& slot_ptr : slots_) {
    Slot& slot = *slot_ptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      slot_freed_.wait(lock, [&] { return !slot.busy; });
      slot.busy = true;
    }
    v1::EvaluationResult why;
    bool ok = slot.has_info || EnsureChild(slot, false, &why);
    if (ok) gpus.push_back(slot.info);
    ReleaseSlot(slot);
    if (!ok && first_error.empty()) {
      first_error = why.diagnostics().message();
      if (!why.diagnostics().log_excerpt().empty()) {
        absl::StrAppend(&first_error, "\n", Tail(why.diagnostics().log_excerpt(), 1024));
      }
    }
  }
  if (gpus.empty()) return absl::FailedPreconditionError(first_error);
  return gpus;
}

}  // namespace kforge
