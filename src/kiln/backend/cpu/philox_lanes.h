// backend/cpu/philox_lanes.h — Philox4x32-10 for kLanes consecutive counters at once, written as
// a lane loop that GCC vectorises (AVX-512: 16 counters per instruction, AVX2: 8): the same
// numbers as core/philox.h's philox4x32, many times faster than calling it per block.
#pragma once
#include <cstdint>

#include "kiln/core/philox.h"

namespace kiln::ops::cpu {

inline constexpr int kPhiloxLanes = 16;

// out[4 * l + w] = word w of philox4x32(seed, stream, (hi << 32) | (lo + l)) for l < kPhiloxLanes:
// the blocks' words in element order. lo + kPhiloxLanes - 1 must not pass 2^32 - 1.
inline void philox_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, uint32_t* out) {
  uint32_t words[4][kPhiloxLanes];
#pragma omp simd
  for (int l = 0; l < kPhiloxLanes; ++l) {
    uint32_t c0 = lo + uint32_t(l), c1 = hi, c2 = uint32_t(stream), c3 = uint32_t(stream >> 32);
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
#pragma GCC unroll 10
    for (int round = 0; round < 10; ++round) philox_round(c0, c1, c2, c3, k0, k1);
    words[0][l] = c0;
    words[1][l] = c1;
    words[2][l] = c2;
    words[3][l] = c3;
  }
  for (int l = 0; l < kPhiloxLanes; ++l)
    for (int w = 0; w < 4; ++w) out[4 * l + w] = words[w][l];
}

}  // namespace kiln::ops::cpu
