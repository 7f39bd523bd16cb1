// Guard canaries and output poison of the evaluator: the byte patterns that expose a kernel
// writing outside its buffers or leaving outputs unwritten. Pure host code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/v1/common.pb.h"
#include "common/tensor_signature.h"

namespace kforge {

// Bytes of canary before and after every buffer a candidate sees (inputs, outputs, scratch).
inline constexpr size_t kCanaryBytes = 4096;

// Fills `size` bytes with the canary pattern of `seed` (distinct per buffer and side, so a
// kernel cannot copy one canary over another unnoticed).
void FillCanary(uint8_t* data, size_t size, uint64_t seed);

// Offset of the first byte that differs from the pattern of `seed`, or -1 when intact.
int64_t FindCanaryDamage(const uint8_t* data, size_t size, uint64_t seed);

// Outputs are poisoned before every launch. Runs alternate two poisons so that an element a
// kernel never writes shows poison A in one run and poison B in the next.
enum class Poison { kA, kB };

bool IsFloating(v1::DType dtype);

// The poison's bit pattern for one element of `dtype` (low ElementSize bytes are used).
// kA is a quiet NaN with a recognizable payload for floating types and 0x5A.. for integers;
// kB is 0xA5.. for every type (a finite value for floats, so a NaN check alone cannot miss it).
uint64_t PoisonBits(v1::DType dtype, Poison poison);


}  // namespace kforge
