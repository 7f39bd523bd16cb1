// Layered configuration: defaults < JSON config file < KFORGE_* environment < command-line
// flags. Every value remembers where it came from so errors can point at the culprit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kforge {

// Higher layers win.
enum class ConfigLayer { kDefault = 0, kFile = 1, kEnvironment = 2, kFlag = 3 };

class Config {
 public:
  // Sets `key` in `layer`. `origin` describes the source for error messages; when empty it
  // is derived from the layer ("default", "flag --store-url", ...).
  void Set(std::string_view key, std::string value, ConfigLayer layer = ConfigLayer::kFlag,
           std::string origin = "");
  void SetDefault(std::string_view key, std::string value) {
    Set(key, std::move(value), ConfigLayer::kDefault);
  }

  // Reads a JSON object: {"store_url": "dir:/x", "port": 50051, "worker": {"slots": 2}}.
  // Nested objects flatten to dotted keys ("worker.slots"); arrays stay as JSON text.
  absl::Status LoadFile(const std::string& path);
  // Reads KFORGE_* variables from the process environment: KFORGE_STORE_URL -> "store_url".
  void LoadEnvironment();

  // The winning value, or nullopt when no layer sets `key`.
  std::optional<std::string> Get(std::string_view key) const;
  // Where the winning value came from ("file /etc/kforge.json", "environment variable
  // KFORGE_PORT", "flag --port", "default"); empty when unset.
  std::string Origin(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key).has_value(); }

  // Typed access; NOT_FOUND when unset, INVALID_ARGUMENT naming key, value and origin when
  // the value does not parse.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetDouble(std::string_view key) const;
  // true/false, 1/0, yes/no, on/off (case-insensitive).
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  // "250ms", "30s", "5m", "1h30m"; a bare number means seconds.
  absl::StatusOr<absl::Duration> GetDuration(std::string_view key) const;

  // All keys with their winning values (for `--print-config` style dumps).
  std::map<std::string, std::string> Snapshot() const;

 private:
  struct Entry {
    std::string value;
    std::string origin;
  };
  const Entry* Find(std::string_view key) const;
  absl::StatusOr<const Entry*> Require(std::string_view key) const;

  std::map<std::string, Entry, std::less<>> layers_[4];
};

}  // namespace kforge
