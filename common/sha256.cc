// sha256 via OpenSSL EVP (see sha256.h).
#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

namespace kforge {
namespace {

// EVP only fails on allocation failure or a broken OpenSSL install; neither is recoverable.
void CheckEvp(int ok, const char* what) {
  if (ok != 1) {
    std::fprintf(stderr, "kforge: OpenSSL %s failed (out of memory or broken libcrypto)\n", what);
    std::abort();
  }
}

std::string ToHex(const unsigned char* bytes, unsigned int size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(size * 2, '0');
  for (unsigned int i = 0; i < size; ++i) {
    hex[2 * i] = kHex[bytes[i] >> 4];
    hex[2 * i + 1] = kHex[bytes[i] & 0xf];
  }
  return hex;
}

}  // namespace

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) CheckEvp(0, "EVP_MD_CTX_new");
  CheckEvp(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(ctx_); }

void Sha256Hasher::Update(std::string_view data) {
  CheckEvp(EVP_DigestUpdate(ctx_, data.data(), data.size()), "EVP_DigestUpdate");
}

std::string Sha256Hasher::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  CheckEvp(EVP_DigestFinal_ex(ctx_, digest, &size), "EVP_DigestFinal_ex");
  CheckEvp(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
  return ToHex(digest, size);
}

std::string Sha256Hex(std::string_view data) {
  Sha256Hasher hasher;
  hasher.Update(data);
  return hasher.Finish();
}

}  // namespace kforge
