// backend/cuda/hd_types.h — element storage for the CUDA kernels' bodies, usable on the device
// and on the host: f32, bf16 and f16 loaded into f32 and stored back rounded to nearest even,
// bitwise as the CPU backend does (backend/cpu/typed.h).
#pragma once
#include <cstdint>

#include "kiln/core/dtype.h"
#include "kiln/core/hd.h"
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace kiln::ops::cuda {

struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };

KILN_HD inline float load(float x) { return x; }
KILN_HD inline float load(bf16_t x) { return bf16_to_f32(x.bits); }
KILN_HD inline float load(f16_t x) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(x.bits));
#else
  return f16_to_f32(x.bits);
#endif
}

template <typename T> KILN_HD T store(float x);
template <> KILN_HD inline float store<float>(float x) { return x; }
template <> KILN_HD inline bf16_t store<bf16_t>(float x) { return {f32_to_bf16(x)}; }
template <> KILN_HD inline f16_t store<f16_t>(float x) {
#if defined(__CUDA_ARCH__)
  return {__half_as_ushort(__float2half_rn(x))};
#else
  return {f32_to_f16(x)};
#endif
}

// Calls fn(T{}) with T the storage type of `dtype`, which the caller has checked is f32, bf16
// or f16.
template <typename Fn>
void with_float_type(DType dtype, Fn&& fn) {
  if (dtype == DType::bf16) {
    fn(bf16_t{});
  } else if (dtype == DType::f16) {
    fn(f16_t{});
  } else {
    fn(float{});
  }
}

}  // namespace kiln::ops::cuda
