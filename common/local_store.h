// LocalStore: the Store in a local directory (embedded runs), one file per key.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/store.h"

namespace kforge {

struct LocalStoreOptions {
  // Time source for TTLs; tests pass a controllable clock. Empty: the system clock.
  std::function<std::chrono::system_clock::time_point()> clock;
};

// Keys are hashed into root/ab/cd/<sha256(key)>; each file holds the original key and the
// expiry beside the value, so expired entries read as absent and List returns real keys.
// Writes go to a temp file and are renamed (or linked, for if_absent) into place, so
// readers never see partial values and several threads or processes may share a directory.
class LocalStore final : public Store {
 public:
  // Creates `root` if needed. FAILED_PRECONDITION when it cannot be created or written.
  static absl::StatusOr<std::unique_ptr<LocalStore>> Create(std::string root,
                                                            LocalStoreOptions options = {});

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>& keys) override;
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options = {}) override;
  absl::Status Overwrite(std::string_view key, std::string_view value) override;
  absl::Status Delete(std::string_view key) override;
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override;
  std::string Describe() const override;

 private:
  LocalStore(std::filesystem::path root, LocalStoreOptions options);

  struct Record {
    std::string key;
    int64_t expires_ms = 0;  // unix ms, 0 = never
    std::string value;
  };
  std::filesystem::path PathFor(std::string_view key) const;
  int64_t NowMs() const;
  // nullopt when the file does not exist.
  absl::StatusOr<std::optional<Record>> ReadRecord(const std::filesystem::path& path) const;
  absl::Status Replace(std::string_view key, std::string_view value, int64_t expires_ms);
  absl::StatusOr<std::filesystem::path> WriteTemp(const std::filesystem::path& final_path,
                                                  std::string_view key, int64_t expires_ms,
                                                  std::string_view value);

  std::filesystem::path root_;
  LocalStoreOptions options_;
};

}  // namespace kforge
