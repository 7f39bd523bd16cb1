// Test helpers for running commands (the kforge binary, the export script) and reading what
// they wrote. Header-only; a test target that uses Python() defines KFORGE_PYTHON_DEFAULT.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kforge {

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

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Runs `command` with sh (stdin from /dev/null, so progress is never live); stdout and stderr
// are collected separately through files in `scratch`.
inline CommandResult RunCommand(const std::string& command, const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / "cmd.out", err = scratch / "cmd.err";
  const std::string full =
      command + " </dev/null >" + Quote(out.string()) + " 2>" + Quote(err.string());
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
  return r;
}

// The non-empty lines of `text`.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

#ifdef KFORGE_PYTHON_DEFAULT
// $KFORGE_PYTHON, else the configured .venv python when it exists here, else python3 (the
// GPU machine's python holds torch).
inline std::string Python() {
  if (const char* p = std::getenv("KFORGE_PYTHON"); p && *p) return p;
  if (std::filesystem::exists(KFORGE_PYTHON_DEFAULT)) return KFORGE_PYTHON_DEFAULT;
  return "python3";
}
#endif

}  // namespace kforge
