// optim/adam_update.h — the Adam moment update and bias-corrected step direction that AdamW and
// LAMB share, written once so both keep the same fp32 expression order.
#pragma once
#include <cmath>

namespace kiln::optim {

// 1 - beta^t for step t (counted from 1), computed in double and rounded to fp32.
inline float adam_bias_correction(float beta, double t) { return float(1.0 - std::pow(double(beta), t)); }

// m <- b1·m + (1-b1)·g ; v <- b2·v + (1-b2)·g².
inline void adam_moments(float g, float b1, float b2, float& m, float& v) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
}

// (m / bc1) / (sqrt(v / bc2) + eps) + wd·w: the Adam direction with decoupled weight decay.
inline float adam_direction(float m, float v, float w, float bc1, float bc2, float eps, float wd) {
  return (m / bc1) / (std::sqrt(v / bc2) + eps) + wd * w;
}

}  // namespace kiln::optim
