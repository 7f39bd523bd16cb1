// Deterministic seed derivation for the search: every proposer call gets a seed that is a
// pure function of the run seed and where in the tree it is made, so a run replays exactly.
// These are mixing functions for seeds, not content hashes (those use common/digest.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace kforge {

// SplitMix64 finalizer: a bijective 64-bit mix with good avalanche.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a over bytes: stable across platforms and runs (std::hash is not).
inline uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Seed for the `counter`-th use of `label` under `base`.
inline uint64_t DeriveSeed(uint64_t base, std::string_view label, uint64_t counter) {
  return SplitMix64(SplitMix64(base ^ Fnv1a64(label)) + counter);
}

}  // namespace kforge
