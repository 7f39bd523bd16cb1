// TempDir via mkdtemp.
#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace kforge {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      (std::filesystem::path(base != nullptr && *base != '\0' ? base : "/tmp") / "kforge-test-XXXXXX")
          .string();
  if (mkdtemp(pattern.data()) == nullptr) {
    // Tests cannot proceed without scratch space; failing loudly is the right outcome.
    throw std::runtime_error("cannot create a temp dir from " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace kforge
