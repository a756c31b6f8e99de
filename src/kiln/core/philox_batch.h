// core/philox_batch.h — Philox4x32-10 for kPhiloxLanes consecutive counters at once (the same
// numbers as core/philox.h's philox4x32, several times faster than calling it per block), and
// uniform floats for a run of elements from it. Host code only: nvcc does not see the pragmas.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kiln/core/philox.h"

namespace kiln {

inline constexpr int kPhiloxLanes = 16;

// out[4 * l + w] = word w of philox4x32(seed, stream, (hi << 32) | (lo + l)) for l < kPhiloxLanes:
// the blocks' words in element order. lo + kPhiloxLanes - 1 must not pass 2^32 - 1. The lane
// loop vectorises (AVX2: 8 counters per instruction).
inline void philox_lanes_portable(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, uint32_t* out) {
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

// out[j] = rng.uniform(first + j) for j < n.
inline void uniforms(const RngStream& rng, uint64_t first, uint64_t n, float* out) {
  constexpr uint64_t kBatch = 4 * kPhiloxLanes;
  uint32_t words[kBatch];
  for (uint64_t e = first / 4 * 4; e < first + n;) {  // e: the first element of block e / 4
    const uint64_t block = e >> 2, j0 = std::max(e, first);
    if (uint32_t(block) > UINT32_MAX - kPhiloxLanes + 1) {  // the lanes' low counter would wrap
      const auto one = rng.block(block);
      for (uint64_t j = j0; j < std::min(e + 4, first + n); ++j) out[j - first] = u32_to_unit_float(one[j - e]);
      e += 4;
      continue;
    }
    philox_lanes_portable(rng.seed, rng.stream, uint32_t(block >> 32), uint32_t(block), words);
    for (uint64_t j = j0; j < std::min(e + kBatch, first + n); ++j) out[j - first] = u32_to_unit_float(words[j - e]);
    e += kBatch;
  }
}

}  // namespace kiln
