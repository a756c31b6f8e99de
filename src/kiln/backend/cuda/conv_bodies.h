// backend/cuda/conv_bodies.h — the convolutions' own kernel body (conv.cc): cuDNN's 16-bit
// filter gradient, (K, R, S, C/groups), into kiln's f32 (K, C/groups, R, S) weight gradient.
#pragma once
#include <cstdint>

#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

// Item i, an element of dw (K, Cg, R*S) in that order: dw[i] (+)= krsc[(k, rs, c)], in f32. One
// pass: reads 2 bytes and writes 4 (reads 4 more when accumulating) per weight.
struct WgradToKcrsBody {
  FloatPtr krsc;  // (K, R*S, Cg)
  float* dw;      // (K, Cg, R*S)
  int64_t Cg, RS;
  bool accumulate;
  KILN_HD void operator()(int64_t i) const {
    const int64_t k = i / (Cg * RS), c = i / RS % Cg, rs = i % RS;
    const float v = krsc[(k * RS + rs) * Cg + c];
    dw[i] = accumulate ? dw[i] + v : v;
  }
};

}  // namespace kiln::ops::cuda
