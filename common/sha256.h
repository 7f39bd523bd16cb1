// sha256 (OpenSSL EVP), the one hashing helper of kforge. No protobuf: the runtime library
// (libkforge_runtime.so) verifies bundle checksums with it inside users' processes.
#pragma once

#include <string>
#include <string_view>

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

}  // namespace kforge
