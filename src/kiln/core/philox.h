// core/philox.h — Philox4x32-10 counter-based RNG (Salmon et al., SC'11).
// Every random number is a pure function of (seed, stream, index), so dropout masks and
// initial weights do not depend on thread count, device or parallel layout.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

#include "kiln/core/hd.h"

namespace kiln {

// What a random stream is for; part of the stream id so streams never collide.
enum class RngPurpose : uint32_t { init = 1, dropout = 2, data = 3, fake_data = 4, test = 5 };

// (purpose, layer, step) -> 64-bit stream id: 8 bits purpose, 16 bits layer, 40 bits step.
constexpr uint64_t rng_stream(RngPurpose purpose, uint32_t layer, uint64_t step) {
  return (uint64_t(purpose) << 56) | (uint64_t(layer & 0xffffu) << 40) | (step & 0xffffffffffull);
}

// One Philox4x32 round of the counter (c0..c3) under the key (k0, k1), then the key's bump.
KILN_HD inline void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t& k0,
                                 uint32_t& k1) {
  const uint64_t p0 = uint64_t(0xD2511F53u) * c0;
  const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
  const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
  const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
  c1 = uint32_t(p1);
  c3 = uint32_t(p0);
  c0 = n0;
  c2 = n2;
  k0 += 0x9E3779B9u;
  k1 += 0xBB67AE85u;
}

KILN_HD inline std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t c0 = uint32_t(index), c1 = uint32_t(index >> 32);
  uint32_t c2 = uint32_t(stream), c3 = uint32_t(stream >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) philox_round(c0, c1, c2, c3, k0, k1);
  return {c0, c1, c2, c3};
}

// Uniform in [0, 1) with 24 random bits.
KILN_HD inline float u32_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

// A named random stream; element i of the stream is reproducible on its own.
struct RngStream {
  uint64_t seed;
  uint64_t stream;

  KILN_HD std::array<uint32_t, 4> block(uint64_t i) const { return philox4x32(seed, stream, i); }
  // Uniform [0, 1) for element i (one Philox block per 4 elements).
  KILN_HD float uniform(uint64_t i) const { return u32_to_unit_float(block(i >> 2)[i & 3]); }
  // Standard normal for element i (Box-Muller on one block).
  float normal(uint64_t i) const {
    const auto b = block(i);
    const double u1 = (double(b[0] >> 8) + 1.0) * (1.0 / 16777217.0);
    const double u2 = double(b[1] >> 8) * (1.0 / 16777216.0);
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  // Integer in [0, n) for element i (64-bit multiply-shift, bias below 2^-32).
  uint64_t below(uint64_t i, uint64_t n) const {
    const auto b = block(i);
    const uint64_t r = (uint64_t(b[0]) << 32) | b[1];
    return uint64_t((static_cast<unsigned __int128>(r) * n) >> 64);
  }
};

}  // namespace kiln
