// TransformersServeProcess: write the tiny model, posix_spawn `transformers serve` in its own
// process group with an offline environment, poll /health, SIGTERM then SIGKILL the group.
#include "tests/llm/transformers_serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "tests/support/command.h"
#include "tests/support/free_port.h"

extern char** environ;

namespace kforge::testing {
namespace {

// Nothing may reach the network (CI has none to offer and the model is local): no Hub lookups,
// no PyPI update check, no telemetry; Hugging Face caches go under `home`.
std::vector<std::string> OfflineEnvironment(const std::string& home) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("HF_", 0) == 0 || entry.rfind("TRANSFORMERS_", 0) == 0) continue;
    env.push_back(entry);
  }
  for (const char* entry : {"HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1",
                            "HF_HUB_DISABLE_UPDATE_CHECK=1", "HF_HUB_DISABLE_TELEMETRY=1",
                            "TOKENIZERS_PARALLELISM=false", "PYTHONUNBUFFERED=1"}) {
    env.emplace_back(entry);
  }
  env.push_back("HF_HOME=" + home);
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

TransformersServeProcess::TransformersServeProcess(std::string python, std::string script)
    : python_(std::move(python)), script_(std::move(script)) {}

TransformersServeProcess::~TransformersServeProcess() { Stop(); }

std::string TransformersServeProcess::origin() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}
std::string TransformersServeProcess::base_url() const { return origin() + "/v1"; }

absl::StatusOr<std::string> TransformersServeProcess::MissingPackages() {
  const std::string probe =
      "import importlib.util as u\n"
      "missing = [n for n in (\"transformers\", \"fastapi\", \"uvicorn\", \"openai\","
      " \"accelerate\") if u.find_spec(n) is None]\n"
      "if not missing and u.find_spec(\"transformers.cli.serve\") is None:\n"
      "    missing.append(\"transformers with the serve command (>= 5)\")\n"
      "print(\", \".join(missing))\n";  // no single quotes: the shell command quotes with them
  CommandResult r = RunCommand(Quote(python_) + " -c " + Quote(probe), dir_.path());
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", python_, " to look for transformers serve's packages (exit ",
                     r.exit_code, "): ", r.err));
  }
  return std::string(absl::StripAsciiWhitespace(r.out));
}

absl::Status TransformersServeProcess::Start(absl::Duration timeout) {
  if (pid_ > 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout;
  CommandResult written = RunCommand("HF_HUB_OFFLINE=1 " + Quote(python_) + " " + Quote(script_) +
                                         " " + Quote(model()),
                                     dir_.path());
  if (written.exit_code != 0) {
    return absl::InternalError(absl::StrCat(script_, " could not write the tiny model (exit ",
                                            written.exit_code, "): ", written.err));
  }

  port_ = FreeLoopbackPort();
  if (port_ <= 0) return absl::InternalError("no free loopback port for transformers serve");
  std::vector<std::string> args = {
      python_, "-c",
      "import sys; from transformers.cli.transformers import main; "
      "sys.argv[0] = 'transformers'; sys.exit(main())",
      "serve", model(), "--device", "cpu", "--host", "127.0.0.1", "--port", std::to_string(port_),
      "--log-level", "info"};
  std::vector<std::string> env = OfflineEnvironment((dir_ / "hf").string());
  std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  const std::string log = (dir_ / "server.log").string();

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group, so Stop() reaches anything the server starts.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, python_.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", python_, ": ", strerror(rc)));
  }
  pid_ = pid;

  httplib::Client client(origin());
  client.set_connection_timeout(std::chrono::seconds(1));
  client.set_read_timeout(std::chrono::seconds(5));
  while (absl::Now() < deadline) {
    if (!Alive()) {
      return absl::InternalError(
          absl::StrCat("transformers serve exited during startup; its log ends:\n", LogTail()));
    }
    httplib::Result health = client.Get("/health");
    if (health && health->status == 200) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string tail = LogTail();
  Stop();
  return absl::DeadlineExceededError(
      absl::StrCat("transformers serve on port ", port_, " did not answer /health within ",
                   absl::FormatDuration(timeout), "; its log ends:\n", tail));
}

bool TransformersServeProcess::Alive() {
  if (pid_ <= 0) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void TransformersServeProcess::Stop() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string TransformersServeProcess::LogTail(size_t bytes) const {
  const std::string log = ReadWholeFile(dir_ / "server.log");
  return log.size() <= bytes ? log : "..." + log.substr(log.size() - bytes);
}

}  // namespace kforge::testing
