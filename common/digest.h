// sha256 hashing (OpenSSL EVP), the one hashing helper of kforge: store keys, digests, ids.
#pragma once

#include <string>
#include <string_view>

#include "kforge/v1/common.pb.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace kforge {

// Lowercase hex sha256 of `data`.
std::string Sha256Hex(std::string_view data);

// Incremental sha256 for data that arrives in pieces (chunked blobs, canonical keys).
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(std::string_view data);
  // Lowercase hex digest; the hasher is reset and can be reused afterwards.
  std::string Finish();

 private:
  EVP_MD_CTX* ctx_;
};

// Digest (sha256 + size) of `data`.
v1::Digest MakeDigest(std::string_view data);

// The id of a candidate kernel: sha256 over its source and launch plan, separated so that no
// (source, plan) split collides. Every proposer and tool names candidates with it.
std::string CandidateId(std::string_view source, std::string_view launch_plan_json);

}  // namespace kforge
