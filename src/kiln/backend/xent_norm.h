// backend/xent_norm.h — the divisor and row coefficients of a softmax cross-entropy's gradient,
// shared by the CPU kernels and the CUDA kernels' bodies. The divisor is read from the totals
// that the forward left on the device when the backward runs, so a replayed graph divides each
// batch by its own weight sum.
#pragma once
#include <cstdint>

#include "kiln/core/hd.h"

namespace kiln::ops {

// norm = max(totals[1] + add, at_least), totals f64 [Σ loss, Σ w, hits] (softmax_xent_forward):
// Σ w + 1e-5 for the masked-LM loss, the counted rows (at least 1) for a mean.
struct XentNorm {
  double add = 0, at_least = 0;
  KILN_HD double divisor(const double* totals) const {
    const double n = totals[1] + add;
    return n > at_least ? n : at_least;
  }
};

// Row i's coefficient: scale · f32(w_i / norm) with weights; f32(scale / norm) without them (a
// mean rounds dloss / count once, as PyTorch's does).
KILN_HD inline float xent_row_factor(const float* weights, int64_t i, float scale, double norm) {
  return weights ? scale * float(double(weights[i]) / norm) : float(double(scale) / norm);
}

}  // namespace kiln::ops
