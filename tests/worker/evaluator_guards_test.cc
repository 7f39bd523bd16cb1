// Canary patterns and poison values, on host buffers.
#include "services/worker/evaluator_guards.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(CanaryTest, IntactCanaryIsFound) {
  std::vector<uint8_t> buf(kCanaryBytes);
  FillCanary(buf.data(), buf.size(), 17);
  EXPECT_EQ(FindCanaryDamage(buf.data(), buf.size(), 17), -1);
}

TEST(CanaryTest, FirstDamagedByteIsReported) {
  std::vector<uint8_t> buf(kCanaryBytes);
  FillCanary(buf.data(), buf.size(), 5);
  buf[123] ^= 0x01;
  buf[4000] ^= 0xFF;
  EXPECT_EQ(FindCanaryDamage(buf.data(), buf.size(), 5), 123);
}

TEST(CanaryTest, WriteOfZerosOrACopiedCanaryIsCaught) {
  std::vector<uint8_t> a(kCanaryBytes), b(kCanaryBytes);
  FillCanary(a.data(), a.size(), 2);
  FillCanary(b.data(), b.size(), 3);
  // Different seeds give different patterns, so copying one canary over another shows.
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size()), 0);
  EXPECT_GE(FindCanaryDamage(b.data(), b.size(), 2), 0);
  // A stray 4-byte zero write is seen (the pattern has no long runs of zeros).
  std::memset(a.data() + 64, 0, 4);
  EXPECT_GE(FindCanaryDamage(a.data(), a.size(), 2), 60);
  EXPECT_LE(FindCanaryDamage(a.data(), a.size(), 2), 67);
}

TEST(PoisonTest, PoisonAIsNanForFloatsAndBIsFinite) {
  uint32_t a32 = static_cast<uint32_t>(PoisonBits(v1::FLOAT32, Poison::kA));
  uint32_t b32 = static_cast<uint32_t>(PoisonBits(v1::FLOAT32, Poison::kB));
  float fa, fb;
  std::memcpy(&fa, &a32, 4);
  std::memcpy(&fb, &b32, 4);
  EXPECT_TRUE(std::isnan(fa));
  EXPECT_TRUE(std::isfinite(fb));
  uint64_t a64 = PoisonBits(v1::FLOAT64, Poison::kA);
  double da;
  std::memcpy(&da, &a64, 8);
  EXPECT_TRUE(std::isnan(da));
  // Half and bfloat16: exponent all ones, mantissa nonzero.
  uint64_t h = PoisonBits(v1::FLOAT16, Poison::kA);
  EXPECT_EQ(h & 0x7C00, 0x7C00u);
  EXPECT_NE(h & 0x03FF, 0u);
  uint64_t bf = PoisonBits(v1::BFLOAT16, Poison::kA);
  EXPECT_EQ(bf & 0x7F80, 0x7F80u);
  EXPECT_NE(bf & 0x007F, 0u);
  EXPECT_LE(h, 0xFFFFu);
  EXPECT_LE(bf, 0xFFFFu);
}

TEST(PoisonTest, PatternsDifferAndFitTheElement) {
  for (v1::DType d : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16, v1::FLOAT64, v1::INT64, v1::INT32,
                      v1::INT16, v1::INT8, v1::UINT8, v1::BOOL}) {
    int size = ElementSize(d);
    ASSERT_GT(size, 0) << DTypeName(d);
    uint64_t a = PoisonBits(d, Poison::kA), b = PoisonBits(d, Poison::kB);
    EXPECT_NE(a, b) << DTypeName(d);
    if (size < 8) {
      EXPECT_LT(a, uint64_t{1} << (8 * size)) << DTypeName(d);
      EXPECT_LT(b, uint64_t{1} << (8 * size)) << DTypeName(d);
    }
  }
  // Bool poison is neither 0 nor 1: a kernel must write every flag.
  EXPECT_GT(PoisonBits(v1::BOOL, Poison::kA), 1u);
  EXPECT_GT(PoisonBits(v1::BOOL, Poison::kB), 1u);
}

}  // namespace
}  // namespace kforge
