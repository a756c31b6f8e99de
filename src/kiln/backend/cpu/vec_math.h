// backend/cpu/vec_math.h — branch-free float exp and erf that GCC vectorises inside
// `#pragma omp simd` loops (glibc's vector variants need -ffast-math, which kiln does not use).
// Written with ternaries and the 1.5*2^23 rounding trick because GCC does not vectorise
// std::floor / std::fmin / std::copysign under the default -ftrapping-math.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::ops::vec {

// exp(x) with a relative error of a few ulp (Cephes expf); 0 below -87.3, saturates above 88.
inline float exp(float x) {
  float xc = x < -87.3f ? -87.3f : x;
  xc = xc > 88.0f ? 88.0f : xc;  // keeps 2^n finite
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;  // xc - n ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((int32_t(n) + 127) << 23);
  return x < -87.3f ? 0.0f : y * scale;
}

// erf(x) given exp_neg_x2 = exp(-x²), which GELU's backward also needs for its density; an
// absolute error below 6e-7 in float (Abramowitz & Stegun 7.1.26: 1.5e-7).
inline float erf_given_exp(float x, float exp_neg_x2) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float e = 1.0f - p * t * exp_neg_x2;
  return x < 0.0f ? -e : e;
}

inline float erf(float x) {
  const float a = x < 0.0f ? -x : x;
  return erf_given_exp(x, vec::exp(-a * a));
}

// tanh(x) = 1 - 2 / (exp(2x) + 1); absolute error ~1e-7 (fine where tanh is added to 1).
inline float tanh_abs(float x) { return 1.0f - 2.0f / (vec::exp(2.0f * x) + 1.0f); }

}  // namespace kiln::ops::vec
