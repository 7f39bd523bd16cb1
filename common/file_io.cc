// Whole-file reads and writes (see file_io.h).
#include "common/file_io.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kforge {

namespace fs = std::filesystem;

absl::Status WriteFileAtomically(const fs::path& path, const std::string& data) {
  const fs::path temporary =
      path.parent_path() / absl::StrCat(".", path.filename().string(), ".tmp.", ::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(data.data(), static_cast<std::streamsize>(data.size()));
    file.close();
    if (!file) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", path.string(),
                                                      ": check the directory's permissions "
                                                      "and free space"));
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream buffer;
  buffer << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  return buffer.str();
}

}  // namespace kforge
