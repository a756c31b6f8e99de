#include "kiln/core/dtype.h"

#include "kiln/core/error.h"

namespace kiln {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::i64: case DType::f64: return 8;
    case DType::bf16: case DType::f16: case DType::u16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u16: return "u16";
    case DType::u8: return "u8";
    case DType::f64: return "f64";
  }
  return "?";
}

DType dtype_from_name(std::string_view n) {
  if (n == "f32" || n == "F32" || n == "float32" || n == "fp32") return DType::f32;
  if (n == "bf16" || n == "BF16" || n == "bfloat16") return DType::bf16;
  if (n == "f16" || n == "F16" || n == "float16" || n == "fp16" || n == "half") return DType::f16;
  if (n == "i32" || n == "I32" || n == "int32") return DType::i32;
  if (n == "i64" || n == "I64" || n == "int64") return DType::i64;
  if (n == "u16" || n == "U16" || n == "uint16") return DType::u16;
  if (n == "u8" || n == "U8" || n == "uint8") return DType::u8;
  if (n == "f64" || n == "F64" || n == "float64") return DType::f64;
  throw Error("unknown dtype '{}' (expected f32, bf16, f16, i32, i64, u16, u8 or f64)", n);
}

uint16_t f32_to_f16_portable(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflows to inf after rounding
  if (abs < 0x38800000u) {                                  // subnormal half or zero
    if (abs < 0x33000000u) return uint16_t(sign);           // below half of the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;                       // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

float f16_to_f32_portable(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400u));
      x = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | (exp + 112) << 23 | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace kiln
