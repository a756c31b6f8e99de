// backend/cpu/adam_math.h — the Adam moment update and bias-corrected step direction that AdamW
// and LAMB share, written once so both keep the same fp32 expression order (tests use them as
// the bitwise reference).
#pragma once
#include <cmath>

namespace kiln::ops::cpu {

// m <- b1·m + (1-b1)·g ; v <- b2·v + (1-b2)·g².
inline void adam_moments(float g, float b1, float b2, float& m, float& v) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
}

// (m / bc1) / (sqrt(v / bc2) + eps) + wd·w: the Adam direction with decoupled weight decay.
inline float adam_direction(float m, float v, float w, float bc1, float bc2, float eps, float wd) {
  return (m / bc1) / (std::sqrt(v / bc2) + eps) + wd * w;
}

}  // namespace kiln::ops::cpu
