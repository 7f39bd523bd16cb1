// Large content-addressed blobs over any Store, in chunks (captured tensors reach 100s of MB).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

inline constexpr size_t kBlobChunkBytes = 4 << 20;

// Stores `data` as 4 MiB chunks under "chunk/<sha256>" and a JSON manifest under
// "blob/<sha256 of data>"; returns the blob's digest. Idempotent.
absl::StatusOr<v1::Digest> PutBlob(Store& store, std::string_view data);

// Reassembles a blob and verifies every chunk and the whole against their sha256 and size.
// NOT_FOUND when the manifest or a chunk is missing, DATA_LOSS on a mismatch.
absl::StatusOr<std::string> GetBlob(Store& store, const v1::Digest& digest);

// A cache lookup: a store error is logged as a warning and reported as a miss.
std::optional<std::string> LookupOrMiss(Store& store, std::string_view key);

}  // namespace kforge
