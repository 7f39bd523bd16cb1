// Helpers of the `kforge optimize` tests: make the tiny model with Python, run the kforge
// binary and collect its exit code and output, read the run directory's JSON.
#pragma once

#include <filesystem>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/support/command.h"

namespace kforge::optimize_test {

using kforge::CommandResult;
using kforge::Lines;
using kforge::Python;
using kforge::Quote;
using kforge::RunCommand;

inline std::string ReadText(const std::filesystem::path& path) { return ReadWholeFile(path); }

inline nlohmann::json ReadJson(const std::filesystem::path& path) {
  return nlohmann::json::parse(ReadText(path), nullptr, /*allow_exceptions=*/false);
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
