// backend/cpu/elementwise.cc — elementwise ops, bias add / grad, activations, dropout.
#include <algorithm>
#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/vec_math.h"

namespace kiln::ops {
namespace {

constexpr int64_t kParallelMin = 8192;  // below this an OpenMP region costs more than it saves
constexpr int64_t kColumnBlock = 64;    // columns per task in deterministic column sums

}  // namespace

void add(const float* a, const float* b, int64_t n, float* out) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

void bias_add(float* y, const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
  for (int64_t r = 0; r < N; ++r) {
    float* row = y + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) row[c] += bias[c];
  }
}

// Each task owns a block of columns and walks all rows in order, so the sum does not depend
// on the thread count.
void bias_grad(const float* dy, int64_t N, int64_t C, float* db) {
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock, w = std::min(kColumnBlock, C - c0);
    double acc[kColumnBlock] = {};
    for (int64_t r = 0; r < N; ++r) {
      const float* row = dy + r * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) acc[c] += row[c];
    }
    for (int64_t c = 0; c < w; ++c) db[c0 + c] += float(acc[c]);
  }
}

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

}  // namespace

void gelu_forward(GeluKind kind, const float* x, int64_t n, float* y) {
  if (kind == GeluKind::erf) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + vec::erf(x[i] * kInvSqrt2));
  } else {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + vec::tanh_abs(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
    }
  }
}

void gelu_backward(GeluKind kind, const float* x, const float* dy, int64_t n, float* dx) {
  if (kind == GeluKind::erf) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      const float cdf = 0.5f * (1.0f + vec::erf(v * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * vec::exp(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      const float t = vec::tanh_abs(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
  }
}

void tanh_forward(const float* x, int64_t n, float* y) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void tanh_backward(const float* y, const float* dy, int64_t n, float* dx) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

namespace {

// out[i] = in[i] * (uniform(i) < p ? 0 : 1/(1-p)); one Philox block serves 4 elements.
void apply_dropout_mask(const float* in, int64_t n, float p, const RngStream& rng, float* out) {
  const float scale = 1.0f / (1.0f - p);
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > kParallelMin / 4)
  for (int64_t j = 0; j < blocks; ++j) {
    const auto bits = rng.block(uint64_t(j));
    const int64_t i0 = 4 * j, m = std::min<int64_t>(4, n - i0);
    for (int64_t k = 0; k < m; ++k)
      out[i0 + k] = u32_to_unit_float(bits[k]) < p ? 0.0f : in[i0 + k] * scale;
  }
}

}  // namespace

void dropout_forward(const float* x, int64_t n, float p, const RngStream& rng, float* y) {
  apply_dropout_mask(x, n, p, rng, y);
}

void dropout_backward(const float* dy, int64_t n, float p, const RngStream& rng, float* dx) {
  apply_dropout_mask(dy, n, p, rng, dx);
}

}  // namespace kiln::ops
