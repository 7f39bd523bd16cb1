// SeededRng: the synthesizer's only source of randomness. std:: distributions differ across
// standard libraries, so the mapping from engine output to numbers is ours: same seed, same
// proposals on every build.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kforge::synth {

class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : engine_(seed) {}

  uint64_t Next() { return engine_(); }

  // Uniform integer in [0, bound) by rejection (no modulo bias); bound 0 gives 0.
  uint64_t Below(uint64_t bound) {
    if (bound <= 1) return 0;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
      x = engine_();
    } while (x >= limit);
    return x % bound;
  }

  // Uniform double in [0, 1) from the top 53 bits.
  double Unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[Below(i)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace kforge::synth
