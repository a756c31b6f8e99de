// backend/cpu/master_halves.h — an f32 master weight held as two 16-bit halves: the high half is
// the weight in bf16 (the compute copy the products read), the low half the signed remainder in
// f32 bits, so that the pair gives the f32 back exactly and costs 4 bytes instead of the 6 of an
// f32 master beside a bf16 copy.
#pragma once
#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln::ops::cpu {

// The high half rounds to nearest with ties away from zero (round-to-nearest-even would need a
// 17th bit to undo at ties); NaN stays NaN (quiet) with a zero low half.
inline void split_halves(float x, uint16_t& high, uint16_t& low) {
  const uint32_t u = f32_bits(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t h = nan ? (u >> 16) | 0x40u : (u + 0x8000u) >> 16;
  high = uint16_t(h);
  low = nan ? uint16_t(0) : uint16_t(u - (h << 16));  // the remainder, in [-0x8000, 0x7fff] as int16
}

inline float join_halves(uint16_t high, uint16_t low) {
  return f32_from_bits((uint32_t(high) << 16) + uint32_t(int32_t(int16_t(low))));
}

}  // namespace kiln::ops::cpu
