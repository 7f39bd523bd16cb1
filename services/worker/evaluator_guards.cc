// Canary patterns and poison values of the evaluator.
#include "services/worker/evaluator_guards.h"

namespace kforge {
namespace {

// splitmix64: a cheap, well-mixed byte stream from the seed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint8_t CanaryByte(uint64_t seed, size_t i) {
  return static_cast<uint8_t>(Mix(seed ^ (i / 8) * 0x100000001b3ULL) >> (8 * (i % 8)));
}

uint64_t Repeat(uint8_t byte) { return 0x0101010101010101ULL * byte; }

}  // namespace

void FillCanary(uint8_t* data, size_t size, uint64_t seed) {
  for (size_t i = 0; i < size; ++i) data[i] = CanaryByte(seed, i);
}

int64_t FindCanaryDamage(const uint8_t* data, size_t size, uint64_t seed) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != CanaryByte(seed, i)) return static_cast<int64_t>(i);
  }
  return -1;
}


bool IsFloating(v1::DType dtype) {
  return dtype == v1::FLOAT32 || dtype == v1::FLOAT16 || dtype == v1::BFLOAT16 ||
         dtype == v1::FLOAT64;
}

uint64_t PoisonBits(v1::DType dtype, Poison poison) {
  int size = ElementSize(dtype);
  uint64_t mask = size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  if (poison == Poison::kB) return Repeat(0xA5) & mask;
  switch (dtype) {
    case v1::FLOAT32:
      return 0x7FC0DEADULL;  // quiet NaN, payload 0xDEAD
    case v1::FLOAT64:
      return 0x7FF8DEADBEEFDEADULL;
    case v1::FLOAT16:
      return 0x7E5AULL;  // exponent all ones, quiet bit, payload 0x5A
    case v1::BFLOAT16:
      return 0x7FDAULL;
    default:
      return Repeat(0x5A) & mask;
  }
}


}  // namespace kforge
