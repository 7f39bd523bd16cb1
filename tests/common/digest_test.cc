// Sha256Hex, Sha256Hasher and MakeDigest against published SHA-256 test vectors.
#include "common/digest.h"

#include <string>

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(DigestTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(DigestTest, BinaryDataWithZeros) {
  std::string data("a\0b", 3);
  EXPECT_NE(Sha256Hex(data), Sha256Hex("a"));
  EXPECT_EQ(Sha256Hex(data).size(), 64u);
}

TEST(DigestTest, IncrementalMatchesOneShotAndResets) {
  Sha256Hasher hasher;
  hasher.Update("abcdbcdecdefdefgefgh");
  hasher.Update("");
  hasher.Update("fghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(hasher.Finish(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  hasher.Update("abc");
  EXPECT_EQ(hasher.Finish(), Sha256Hex("abc"));
}

TEST(DigestTest, MakeDigestCarriesSize) {
  v1::Digest digest = MakeDigest("abc");
  EXPECT_EQ(digest.sha256(), Sha256Hex("abc"));
  EXPECT_EQ(digest.size_bytes(), 3);
}

}  // namespace
}  // namespace kforge
