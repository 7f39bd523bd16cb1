// Whole-file reads and writes that a reader never sees half of.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kforge {

// Writes `data` to `path` through a temporary file in the same directory and a rename: readers
// (and a later --resume) see the old file or the new one whole, even when the writer is killed.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& data);
absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path);

}  // namespace kforge
