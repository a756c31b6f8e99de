// core/dtype.h — element types and the bf16 / f16 <-> f32 conversions.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kiln/core/hd.h"
#if defined(__F16C__)
#include <immintrin.h>
#endif

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
// IEEE half precision, round to nearest even, with subnormals, inf and NaN. The portable
// versions are always built (and tested against the F16C instructions where both exist);
// f32_to_f16 / f16_to_f32 are one instruction each where the build targets F16C.
uint16_t f32_to_f16_portable(float f);
float f16_to_f32_portable(uint16_t h);
#if defined(__F16C__)
inline uint16_t f32_to_f16(float f) { return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }
inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
#else
inline uint16_t f32_to_f16(float f) { return f32_to_f16_portable(f); }
inline float f16_to_f32(uint16_t h) { return f16_to_f32_portable(h); }
#endif

}  // namespace kiln
