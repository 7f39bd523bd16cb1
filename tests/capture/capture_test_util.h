// Helpers of the capture tests: run a command and collect its exit code and output, find the
// Python that has torch, and paths the build compiles in.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kforge::capture_test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `command` with sh; stdout and stderr are collected separately.
inline CommandResult RunCommand(const std::string& command, const std::filesystem::path& scratch) {
  std::filesystem::path out = scratch / "cmd.out", err = scratch / "cmd.err";
  std::string full = command + " >" + out.string() + " 2>" + err.string();
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
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

// $KFORGE_PYTHON, else the configured .venv python when it exists here, else python3 (the
// GPU machine's python holds torch).
inline std::string Python() {
  if (const char* p = std::getenv("KFORGE_PYTHON"); p && *p) return p;
  if (std::filesystem::exists(KFORGE_PYTHON_DEFAULT)) return KFORGE_PYTHON_DEFAULT;
  return "python3";
}

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The kforge binary under test: $KFORGE_BIN, else the one this build made.
inline std::string Kforge() {
  if (const char* p = std::getenv("KFORGE_BIN"); p && *p) return p;
  return KFORGE_BINARY;
}

}  // namespace kforge::capture_test
