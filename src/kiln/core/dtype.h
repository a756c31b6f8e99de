// core/dtype.h — element types and the bf16 / f16 <-> f32 conversions.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kiln/core/hd.h"

namespace kiln {

enum class DType : uint8_t { f32, bf16, f16, i32, i64, u16, u8, f64 };  // f64: host-side sums (dist/)

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);     // "f32", "bf16", ... (safetensors uses upper case)
DType dtype_from_name(std::string_view);  // accepts "f32"/"F32"/"float32"; throws kiln::Error

// bf16: upper 16 bits of an f32, rounded to nearest even; NaN stays NaN.
// Written as a select, not an early return, so that loops storing bf16 vectorise.
KILN_HD inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
KILN_HD inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
// IEEE half precision, round to nearest even, with subnormals, inf and NaN (a NaN becomes the
// quiet NaN 0x7e00 with its sign). f32_to_f16 / f16_to_f32 are branch-free selects over integer
// and f32 arithmetic, so that loops over f16 storage vectorise (GCC vectorises neither F16C's
// scalar intrinsics nor _Float16 casts). Their subnormal paths hold under flush-to-zero too: the
// operations there take normal f32 values, or an f32 subnormal, which rounds to 0 in f16 anyway.
// The portable versions are the branching reference the tests hold them to.
uint16_t f32_to_f16_portable(float f);
float f16_to_f32_portable(uint16_t h);
KILN_HD inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, magnitude = h & 0x7fffu;
  const uint32_t normal = (magnitude << 13) + 0x38000000u;           // exponent rebiased 15 -> 127
  const uint32_t special = (magnitude << 13) | 0x7f800000u;          // inf, NaN
  const uint32_t subnormal = f32_bits(float(int32_t(magnitude)) * 0x1p-24f);
  const uint32_t bits = magnitude < 0x0400u ? subnormal : (magnitude >= 0x7c00u ? special : normal);
  return f32_from_bits(bits | sign);
}
// Every candidate result h is carried as the f32 with bits 0x3f000000 + h (0.5 plus h units of
// 2^-24), so that the selects are between f32 values: GCC narrows integer selects that feed a
// 16-bit store to 16 bits and then fails to vectorise some loops around them.
KILN_HD inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u, magnitude = x & 0x7fffffffu;
  const uint32_t normal = (magnitude - 0x38000000u + 0x0fffu + ((magnitude >> 13) & 1u)) >> 13;
  // Below 2^-14 the addition itself rounds the value to nearest even in units of 2^-24, f16's
  // subnormal step.
  const float subnormal = f32_from_bits(magnitude) + 0.5f;
  float h = magnitude < 0x38800000u ? subnormal : f32_from_bits(0x3f000000u + normal);
  h = h < f32_from_bits(0x3f007c00u) ? h : f32_from_bits(0x3f007c00u);  // past 65504: inf
  h = magnitude > 0x7f800000u ? f32_from_bits(0x3f007e00u) : h;         // NaN
  return uint16_t(sign | (f32_bits(h) - 0x3f000000u));
}

}  // namespace kiln
