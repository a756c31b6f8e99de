// backend/cpu/pool.cc — max pooling and global average pooling over NHWC activations. Backward
// passes run one image per task, so routed gradients are summed in a fixed order.
#include <algorithm>
#include <limits>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::ops {

void maxpool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int64_t P = s.P(), Q = s.Q(), C = s.C;
  KILN_CHECK(P > 0 && Q > 0, "maxpool: input {}x{} is too small for window {}x{}", s.H, s.W, s.R,
             s.S);
#pragma omp parallel for collapse(2) schedule(static) if (s.N * P * Q * C > 16384)
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t p = 0; p < P; ++p) {
      const float* xn = x + n * s.H * s.W * C;
      for (int64_t q = 0; q < Q; ++q) {
        float* yo = y + ((n * P + p) * Q + q) * C;
        int32_t* ao = argmax + ((n * P + p) * Q + q) * C;
        std::fill(yo, yo + C, -std::numeric_limits<float>::infinity());
        std::fill(ao, ao + C, -1);
        for (int64_t i = 0; i < s.R; ++i) {
          const int64_t h = p * s.stride_h - s.pad_h + i;
          if (h < 0 || h >= s.H) continue;
          for (int64_t j = 0; j < s.S; ++j) {
            const int64_t w = q * s.stride_w - s.pad_w + j;
            if (w < 0 || w >= s.W) continue;
            const float* xi = xn + (h * s.W + w) * C;
            const int32_t pos = int32_t(h * s.W + w);
            for (int64_t c = 0; c < C; ++c)
              if (xi[c] > yo[c] || ao[c] < 0) {
                yo[c] = xi[c];
                ao[c] = pos;
              }
          }
        }
      }
    }
}

void maxpool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) {
  const int64_t P = s.P(), Q = s.Q(), C = s.C, HW = s.H * s.W;
#pragma omp parallel for schedule(static) if (s.N > 1)
  for (int64_t n = 0; n < s.N; ++n) {
    float* dxn = dx + n * HW * C;
    std::fill(dxn, dxn + HW * C, 0.0f);
    const float* dyn = dy + n * P * Q * C;
    const int32_t* an = argmax + n * P * Q * C;
    for (int64_t o = 0; o < P * Q; ++o)
      for (int64_t c = 0; c < C; ++c) dxn[int64_t(an[o * C + c]) * C + c] += dyn[o * C + c];
  }
}

void global_avgpool_forward(const float* x, int64_t N, int64_t HW, int64_t C, float* y) {
  const float inv = 1.0f / float(HW);
#pragma omp parallel for schedule(static) if (N * HW * C > 16384)
  for (int64_t n = 0; n < N; ++n) {
    float* yn = y + n * C;
    std::fill(yn, yn + C, 0.0f);
    for (int64_t i = 0; i < HW; ++i) {
      const float* xi = x + (n * HW + i) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yn[c] += xi[c];
    }
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yn[c] *= inv;
  }
}

void global_avgpool_backward(const float* dy, int64_t N, int64_t HW, int64_t C, float* dx) {
  const float inv = 1.0f / float(HW);
#pragma omp parallel for collapse(2) schedule(static) if (N * HW * C > 16384)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i) {
      float* dxi = dx + (n * HW + i) * C;
      const float* dyn = dy + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dxi[c] = dyn[c] * inv;
    }
}

}  // namespace kiln::ops
