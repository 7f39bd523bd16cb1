// Helpers of the capture tests: run a command and collect its exit code and output, find the
// Python that has torch, and paths the build compiles in.
#pragma once

#include <cstdlib>
#include <string>

#include "tests/support/command.h"

namespace kforge::capture_test {

using kforge::CommandResult;
using kforge::Lines;
using kforge::Quote;
using kforge::ReadWholeFile;
using kforge::RunCommand;
#ifdef KFORGE_PYTHON_DEFAULT
using kforge::Python;
#endif

// The kforge binary under test: $KFORGE_BIN, else the one this build made.
inline std::string Kforge() {
  if (const char* p = std::getenv("KFORGE_BIN"); p && *p) return p;
  return KFORGE_BINARY;
}

}  // namespace kforge::capture_test
