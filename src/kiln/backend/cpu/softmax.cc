// backend/cpu/softmax.cc — row softmax (plain and with a per-key additive bias), fp32.
#include <algorithm>
#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/vec_math.h"

namespace kiln::ops {
namespace {

// y = softmax(x + bias) over one row of `cols`; bias may be null; y may alias x.
inline void softmax_row(const float* x, const float* bias, int64_t cols, float* y) {
  float mx = -INFINITY;
  if (bias) {
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[c] + bias[c]);
  } else {
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[c]);
  }
  float sum = 0.0f;
  if (bias) {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += (y[c] = vec::exp(x[c] + bias[c] - mx));
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += (y[c] = vec::exp(x[c] - mx));
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
}

}  // namespace

void softmax_forward(const float* x, int64_t rows, int64_t cols, float* y) {
#pragma omp parallel for schedule(static) if (rows * cols > 8192)
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, nullptr, cols, y + r * cols);
}

void softmax_backward(const float* y, const float* dy, int64_t rows, int64_t cols, float scale,
                      float* dx) {
#pragma omp parallel for schedule(static) if (rows * cols > 8192)
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < cols; ++c) dot += yr[c] * dyr[c];
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) dxr[c] = scale * yr[c] * (dyr[c] - dot);
  }
}

void masked_softmax_forward(const float* x, const float* key_bias, int64_t B, int64_t heads,
                            int64_t Sq, int64_t Sk, float* y) {
  const int64_t rows = B * heads * Sq;
#pragma omp parallel for schedule(static) if (rows * Sk > 8192)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (heads * Sq);
    softmax_row(x + r * Sk, key_bias + b * Sk, Sk, y + r * Sk);
  }
}

}  // namespace kiln::ops
