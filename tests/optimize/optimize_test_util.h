// Helpers of the `kforge optimize` tests: make the tiny model with Python, run the kforge
// binary and collect its exit code and output, read the run directory's JSON.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kforge::optimize_test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline nlohmann::json ReadJson(const std::filesystem::path& path) {
  return nlohmann::json::parse(ReadText(path), nullptr, /*allow_exceptions=*/false);
}

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Runs `command` with sh (stdin from /dev/null, so progress is never live).
inline CommandResult RunCommand(const std::string& command, const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / "cmd.out", err = scratch / "cmd.err";
  const std::string full =
      command + " </dev/null >" + Quote(out.string()) + " 2>" + Quote(err.string());
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadText(out);
  r.err = ReadText(err);
  return r;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// $KFORGE_PYTHON, else the configured .venv python when it exists here, else python3.
inline std::string Python() {
  if (const char* p = std::getenv("KFORGE_PYTHON"); p && *p) return p;
  if (std::filesystem::exists(KFORGE_PYTHON_DEFAULT)) return KFORGE_PYTHON_DEFAULT;
  return "python3";
}

// Writes model.pt and inputs.pt into `dir`; false (with the output in `log`) on failure.
inline bool MakeTinyModel(const std::filesystem::path& dir, const std::string& device,
                          std::string* log) {
  std::filesystem::create_directories(dir);
  CommandResult r =
      RunCommand(Quote(Python()) + " " + Quote(KFORGE_OPTIMIZE_TEST_DIR "/make_tiny_model.py") +
                     " " + Quote(dir.string()) + " " + device,
                 dir);
  *log = r.out + r.err;
  return r.exit_code == 0 && std::filesystem::exists(dir / "model.pt") &&
         std::filesystem::exists(dir / "inputs.pt");
}

inline std::string Kforge() { return Quote(KFORGE_BINARY); }

}  // namespace kforge::optimize_test
