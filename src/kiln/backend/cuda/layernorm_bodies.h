// backend/cuda/layernorm_bodies.h — LayerNorm's CUDA bodies (elementwise_bodies.h says how they run), cut so
// that every launch has many items and neighbouring items read neighbouring elements: a row's
// sums are taken by kRowLanes lanes (lane l adds elements l, l + kRowLanes, ... in double), one
// item per row adds its lanes in lane order, and one item per element applies the result. The
// parameter gradients are summed per (chunk of kLayerNormGradRows rows, column) in f32 and then
// per column over the chunks in double, in order: the CPU backend's sums, bit for bit.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

// Item = lane of a row (item = r * kRowLanes + l): partial[item] = (Σ x, Σ x²) over its elements.
// With `residual` (the residual join before a LayerNorm), x's elements are first replaced by
// sum = x + residual, rounded to sum's dtype and written there, and the moments are sum's.
struct RowMomentsLaneBody {
  FloatPtr x;
  int64_t C;
  double* partial;  // 2 per item
  FloatPtr residual = {}, sum = {};
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kRowLanes) * C;
    double s = 0.0, s2 = 0.0;
    for (int64_t c = item % kRowLanes; c < C; c += kRowLanes) {
      if (residual.p) sum.set(o + c, x[o + c] + residual[o + c]);
      const double v = residual.p ? sum[o + c] : x[o + c];
      s += v;
      s2 += v * v;
    }
    partial[2 * item] = s;
    partial[2 * item + 1] = s2;
  }
};

// Item r: mean = Σx / C and rstd = 1 / sqrt(Σx² / C - mean² + eps), in double from the lanes' sums.
struct LayerNormStatsBody {
  const double* partial;
  int64_t C;
  float eps;
  float* mean;
  float* rstd;
  KILN_HD void operator()(int64_t r) const {
    double s = 0.0, s2 = 0.0;
    for (int64_t j = r * kRowLanes; j < (r + 1) * kRowLanes; ++j) s += partial[2 * j], s2 += partial[2 * j + 1];
    const double m = s / double(C), var = s2 / double(C) - m * m;
    mean[r] = float(m);
    rstd[r] = float(1.0 / sqrt((var > 0.0 ? var : 0.0) + double(eps)));
  }
};

// Item i = element i of (N, C): y = (x - mean) rstd w + b. y may alias x.
struct LayerNormApplyBody {
  FloatPtr x, w, b, y;
  const float* mean;
  const float* rstd;
  int64_t C;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / C, c = i % C;
    y.set(i, (x[i] - mean[r]) * rstd[r] * w[c] + b[c]);
  }
};

// Item = lane of a row: partial[item] = (Σ g, Σ g xhat) over its elements, g = dy w,
// xhat = (x - mean) rstd.
struct LayerNormGradLaneBody {
  FloatPtr x, dy, w;
  const float* mean;
  const float* rstd;
  int64_t C;
  double* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const int64_t r = item / kRowLanes, o = r * C;
    double sg = 0.0, sgx = 0.0;
    for (int64_t c = item % kRowLanes; c < C; c += kRowLanes) {
      const float g = dy[o + c] * w[c];
      sg += g;
      sgx += double(g) * double((x[o + c] - mean[r]) * rstd[r]);
    }
    partial[2 * item] = sg;
    partial[2 * item + 1] = sgx;
  }
};

// Item r: means (N, 2) = (mean of g, mean of g xhat) from the lanes' sums in lane order.
struct LayerNormGradStatsBody {
  const double* partial;
  int64_t C;
  float* means;
  KILN_HD void operator()(int64_t r) const {
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = r * kRowLanes; j < (r + 1) * kRowLanes; ++j) sg += partial[2 * j], sgx += partial[2 * j + 1];
    means[2 * r] = float(sg / double(C));
    means[2 * r + 1] = float(sgx / double(C));
  }
};

// Item i = element i: dx = rstd (g - mean(g) - xhat mean(g xhat)); with accumulate, dx += that.
// dx may alias dy.
struct LayerNormGradApplyBody {
  FloatPtr x, dy, w, dx;
  const float* mean;
  const float* rstd;
  const float* means;  // (N, 2), LayerNormGradStatsBody's
  int64_t C;
  bool accumulate;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / C, c = i % C;
    const float s = rstd[r];
    const float d = s * (dy[i] * w[c] - means[2 * r] - (x[i] - mean[r]) * s * means[2 * r + 1]);
    dx.set(i, accumulate ? dx[i] + d : d);
  }
};

// Item = (chunk k, column c), item = k * C + c: partial[item] = (Σ dy xhat, Σ dy) in f32 over the
// rows [k R, (k + 1) R) of the chunk (R = kLayerNormGradRows), in row order.
struct LayerNormParamChunkBody {
  FloatPtr x, dy;
  const float* mean;
  const float* rstd;
  int64_t N, C;
  float* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const int64_t k = item / C, c = item % C;
    const int64_t r0 = k * kLayerNormGradRows, r1 = r0 + kLayerNormGradRows < N ? r0 + kLayerNormGradRows : N;
    float chunk_w = 0.0f, chunk_b = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
      const float g = dy[r * C + c];
      chunk_w += g * ((x[r * C + c] - mean[r]) * rstd[r]);
      chunk_b += g;
    }
    partial[2 * item] = chunk_w;
    partial[2 * item + 1] = chunk_b;
  }
};

// Item c = column c: dw[c] += Σ_k chunk sums and db[c] likewise, added in double in chunk order.
struct LayerNormParamSumBody {
  const float* partial;
  int64_t chunks, C;
  float* dw;
  float* db;
  KILN_HD void operator()(int64_t c) const {
    double acc_w = 0.0, acc_b = 0.0;
    for (int64_t k = 0; k < chunks; ++k) acc_w += partial[2 * (k * C + c)], acc_b += partial[2 * (k * C + c) + 1];
    dw[c] += float(acc_w);
    db[c] += float(acc_b);
  }
};

}  // namespace kiln::ops::cuda
