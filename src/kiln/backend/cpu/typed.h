// backend/cpu/typed.h — how CPU kernels are written once for every floating-point dtype:
// elements are loaded into f32 registers and stored back rounded (bf16, f16: nearest even), so
// statistics and accumulation stay in f32 whatever the storage type.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {

// Storage types; f32 is plain float.
struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };

inline float load(float x) { return x; }
inline float load(bf16_t x) { return bf16_to_f32(x.bits); }
inline float load(f16_t x) { return f16_to_f32(x.bits); }

template <typename T> inline T store(float x);
template <> inline float store<float>(float x) { return x; }
template <> inline bf16_t store<bf16_t>(float x) { return {f32_to_bf16(x)}; }
template <> inline f16_t store<f16_t>(float x) { return {f32_to_f16(x)}; }

// The largest of row[0, n) (-inf when n == 0), NaN skipped. In 16 lanes: GCC does not vectorise
// an `omp simd reduction(max)` over floats.
template <typename T>
float row_max(const T* row, int64_t n) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  for (float& l : lanes) l = -INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) {
      const float v = load(row[i + l]);
      lanes[l] = v > lanes[l] ? v : lanes[l];
    }
  }
  for (int64_t l = 0; i < n; ++i, ++l) lanes[l] = std::max(lanes[l], load(row[i]));
  float mx = -INFINITY;
  for (float l : lanes) mx = std::max(mx, l);
  return mx;
}

// Calls fn(T{}) with T the storage type of `dtype` (f32, bf16 or f16); other dtypes throw.
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(bf16_t{});
    case DType::f16: return fn(f16_t{});
    default: throw Error("op {}: dtype {} is not a floating-point type", op, dtype_name(dtype));
  }
}

}  // namespace kiln::ops::cpu
