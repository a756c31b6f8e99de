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

// Lanes that read one row together in the row kernels (LayerNorm, softmax, cross-entropy): lane l
// takes elements l, l + kRowLanes, ..., so that a warp's loads are neighbouring elements.
inline constexpr int64_t kRowLanes = 32;

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

// Elements of a float tensor whose storage type (f32, bf16 or f16) is known only at run time.
// The kernels added after the first landing take their operands this way, so that an op whose
// operands may each have any float dtype is one kernel rather than one per combination (27 or
// 81 instantiations, times three GPU architectures, on a 2-core CI machine); the branch on the
// dtype is the same for every thread of a launch.
struct FloatPtr {
  void* p = nullptr;
  DType dtype = DType::f32;
  KILN_HD float operator[](int64_t i) const {
    if (dtype == DType::bf16) return load(static_cast<const bf16_t*>(p)[i]);
    if (dtype == DType::f16) return load(static_cast<const f16_t*>(p)[i]);
    return static_cast<const float*>(p)[i];
  }
  // v rounded to the storage type, as set() then operator[] would give it back.
  KILN_HD float rounded(float v) const {
    if (dtype == DType::bf16) return load(store<bf16_t>(v));
    if (dtype == DType::f16) return load(store<f16_t>(v));
    return v;
  }
  KILN_HD void set(int64_t i, float v) const {
    if (dtype == DType::bf16) static_cast<bf16_t*>(p)[i] = store<bf16_t>(v);
    else if (dtype == DType::f16) static_cast<f16_t*>(p)[i] = store<f16_t>(v);
    else static_cast<float*>(p)[i] = v;
  }
};

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

// Calls fn(T1{}, T2{}, ...) with each T the storage type of the matching dtype (with_float_type).
template <typename Fn, typename... Rest>
void with_float_types(Fn&& fn, DType first, Rest... rest) {
  with_float_type(first, [&](auto t) {
    if constexpr (sizeof...(rest) == 0) fn(t);
    else with_float_types([&](auto... ts) { fn(t, ts...); }, rest...);
  });
}

}  // namespace kiln::ops::cuda
