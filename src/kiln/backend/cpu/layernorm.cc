// backend/cpu/layernorm.cc — LayerNorm over rows, fp32 statistics (two-pass variance).
#include <algorithm>
#include <cmath>

#include "kiln/backend/backend.h"

namespace kiln::ops {

void layernorm_forward(const float* x, const float* w, const float* b, float eps, int64_t N,
                       int64_t C, float* y, float* mean, float* rstd) {
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t r = 0; r < N; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += xr[c];
    const float m = sum / float(C);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - m) * (xr[c] - m);
    const float s = 1.0f / std::sqrt(var / float(C) + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * s * w[c] + b[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean,
                        const float* rstd, int64_t N, int64_t C, float* dx, float* dw,
                        float* db) {
  // dx per row: rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t r = 0; r < N; ++r) {
    const float* xr = x + r * C;
    const float* dyr = dy + r * C;
    float* dxr = dx + r * C;
    const float m = mean[r], s = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t c = 0; c < C; ++c) {
      const float g = dyr[c] * w[c];
      sum_g += g;
      sum_gx += g * (xr[c] - m) * s;
    }
    const float mg = sum_g / float(C), mgx = sum_gx / float(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dxr[c] = s * (dyr[c] * w[c] - mg - (xr[c] - m) * s * mgx);
  }
  // dw, db: column sums in row order per column block (independent of the thread count).
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, wd = std::min(kBlock, C - c0);
    double acc_w[kBlock] = {}, acc_b[kBlock] = {};
    for (int64_t r = 0; r < N; ++r) {
      const float* xr = x + r * C + c0;
      const float* dyr = dy + r * C + c0;
      const float m = mean[r], s = rstd[r];
#pragma omp simd
      for (int64_t c = 0; c < wd; ++c) {
        acc_w[c] += dyr[c] * ((xr[c] - m) * s);
        acc_b[c] += dyr[c];
      }
    }
    for (int64_t c = 0; c < wd; ++c) {
      dw[c0 + c] += float(acc_w[c]);
      db[c0 + c] += float(acc_b[c]);
    }
  }
}

}  // namespace kiln::ops
