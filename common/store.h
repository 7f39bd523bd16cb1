// Store: the content-addressed key/value store every service shares (REAPI-style). Keys are
// namespaced strings ("compile/<sha256>", "eval/<sha256>", "blob/<sha256>", "job/<id>").
// Backends: a local directory (embedded runs) and Redis (clusters). A backend error on a
// cache lookup is reported as a miss by the caching layers, never as a job failure.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kforge {

struct PutOptions {
  // Zero: no expiry. Failures are cached with a short TTL; artifacts without one.
  std::chrono::seconds ttl{0};
  // Write only if absent (Redis SET NX). Content-addressed values never change, so the
  // first writer wins and later writers are no-ops.
  bool if_absent = true;
};

class Store {
 public:
  virtual ~Store() = default;

  // nullopt when the key is absent or expired.
  virtual absl::StatusOr<std::optional<std::string>> Get(std::string_view key) = 0;
  // One round trip where the backend allows (Redis pipelining); result[i] answers keys[i].
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>& keys) = 0;
  virtual absl::Status Put(std::string_view key, std::string_view value,
                           const PutOptions& options = {}) = 0;
  // For mutable records (job state, trees): overwrite unconditionally.
  virtual absl::Status Overwrite(std::string_view key, std::string_view value) = 0;
  virtual absl::Status Delete(std::string_view key) = 0;
  // Keys with the given prefix (job listing; not for hot paths).
  virtual absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) = 0;
  // "dir:/path" or "redis://host:port/db", for logs.
  virtual std::string Describe() const = 0;
};

// Opens a store from a URL: "dir:PATH" (or a plain path) or "redis://HOST:PORT[/DB]".
absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url);

}  // namespace kforge
