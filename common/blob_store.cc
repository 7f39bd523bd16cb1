// Chunked blobs: manifest + content-addressed chunks, verified on read.
#include "common/blob_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

// Debian's abseil has its own string_view type, not std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Chunks fetched per round trip: bounds the memory of one Redis pipeline reply.
constexpr size_t kChunksPerFetch = 8;

std::string ChunkKey(std::string_view sha256) { return absl::StrCat("chunk/", Av(sha256)); }
std::string BlobKey(std::string_view sha256) { return absl::StrCat("blob/", Av(sha256)); }

}  // namespace

absl::StatusOr<v1::Digest> PutBlob(Store& store, std::string_view data) {
  nlohmann::json chunks = nlohmann::json::array();
  Sha256Hasher whole;
  // An empty blob still gets one (empty) chunk, so every manifest has the same shape.
  size_t offset = 0;
  do {
    std::string_view chunk = data.substr(offset, kBlobChunkBytes);
    whole.Update(chunk);
    std::string sha256 = Sha256Hex(chunk);
    absl::Status put = store.Put(ChunkKey(sha256), chunk);
    if (!put.ok()) {
      return absl::Status(put.code(), absl::StrCat("cannot store blob chunk at offset ", offset,
                                                   ": ", put.message()));
    }
    chunks.push_back({{"sha256", sha256}, {"size", chunk.size()}});
    offset += chunk.size();
  } while (offset < data.size());
  v1::Digest digest;
  digest.set_sha256(whole.Finish());
  digest.set_size_bytes(static_cast<int64_t>(data.size()));
  nlohmann::json manifest = {{"size", data.size()}, {"chunks", std::move(chunks)}};
  absl::Status put = store.Put(BlobKey(digest.sha256()), manifest.dump());
  if (!put.ok()) {
    return absl::Status(put.code(),
                        absl::StrCat("cannot store blob manifest: ", put.message()));
  }
  return digest;
}

absl::StatusOr<std::string> GetBlob(Store& store, const v1::Digest& digest) {
  const std::string blob_key = BlobKey(digest.sha256());
  auto manifest_text = store.Get(blob_key);
  if (!manifest_text.ok()) return manifest_text.status();
  if (!manifest_text->has_value()) {
    return absl::NotFoundError(
        absl::StrCat("blob ", digest.sha256(), " is not in store ", store.Describe()));
  }
  nlohmann::json manifest = nlohmann::json::parse(**manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest["size"].is_number() ||
      !manifest["chunks"].is_array()) {
    return absl::DataLossError(
        absl::StrCat("manifest ", blob_key, " in ", store.Describe(), " is corrupt"));
  }
  if (manifest["size"].get<int64_t>() != digest.size_bytes()) {
    return absl::DataLossError(absl::StrCat("blob ", digest.sha256(), " has size ",
                                            manifest["size"].get<int64_t>(), " in ",
                                            store.Describe(), " but ", digest.size_bytes(),
                                            " was expected"));
  }
  const nlohmann::json& chunks = manifest["chunks"];
  std::string data;
  data.reserve(static_cast<size_t>(digest.size_bytes()));
  for (size_t first = 0; first < chunks.size(); first += kChunksPerFetch) {
    size_t last = std::min(chunks.size(), first + kChunksPerFetch);
    std::vector<std::string> keys;
    for (size_t i = first; i < last; ++i) {
      keys.push_back(ChunkKey(chunks[i].value("sha256", "")));
    }
    auto values = store.GetMany(keys);
    if (!values.ok()) return values.status();
    for (size_t i = first; i < last; ++i) {
      const std::optional<std::string>& chunk = (*values)[i - first];
      if (!chunk.has_value()) {
        return absl::NotFoundError(absl::StrCat("chunk ", i, " (", keys[i - first], ") of blob ",
                                                digest.sha256(), " is missing from ",
                                                store.Describe()));
      }
      if (Sha256Hex(*chunk) != chunks[i].value("sha256", "") ||
          chunk->size() != chunks[i].value("size", size_t{0})) {
        return absl::DataLossError(absl::StrCat("chunk ", i, " (", keys[i - first],
                                                ") of blob ", digest.sha256(), " in ",
                                                store.Describe(), " is corrupt"));
      }
      data += *chunk;
    }
  }
  if (static_cast<int64_t>(data.size()) != digest.size_bytes() ||
      Sha256Hex(data) != digest.sha256()) {
    return absl::DataLossError(absl::StrCat("blob ", digest.sha256(), " in ", store.Describe(),
                                            " does not match its digest"));
  }
  return data;
}

std::optional<std::string> LookupOrMiss(Store& store, std::string_view key) {
  auto value = store.Get(key);
  if (!value.ok()) {
    spdlog::warn("store {} lookup of {} failed, treating it as a miss: {}", store.Describe(), key,
                 value.status().ToString());
    return std::nullopt;
  }
  return std::move(*value);
}

}  // namespace kforge
