// backend/cpu/relu.cc — ReLU and the fused residual add + ReLU.
#include <algorithm>

#include "kiln/backend/backend.h"

namespace kiln::ops {
namespace {
constexpr int64_t kParallelMin = 16384;
}  // namespace

void relu_forward(const float* x, int64_t n, float* y) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void relu_backward(const float* y, const float* dy, int64_t n, float* dx) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void add_relu_forward(const float* a, const float* b, int64_t n, float* y) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(a[i] + b[i], 0.0f);
}

}  // namespace kiln::ops
