// backend/cpu/losses.cc — log-sum-exp per row and the softmax cross-entropy gradient.
#include <cmath>

#include "kiln/backend/backend.h"

namespace kiln::ops {

void logsumexp_rows(const float* logits, int64_t N, int64_t V, float* lse, int32_t* argmax) {
#pragma omp parallel for schedule(static) if (N * V > 8192)
  for (int64_t i = 0; i < N; ++i) {
    const float* row = logits + i * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    const float mx = row[best];
    double sum = 0.0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v] - mx));
    lse[i] = float(double(mx) + std::log(sum));
    argmax[i] = int32_t(best);
  }
}

void softmax_xent_backward(const float* logits, const float* lse, const int32_t* target,
                           const float* coef, float scale, int64_t N, int64_t V,
                           float* dlogits) {
#pragma omp parallel for schedule(static) if (N * V > 8192)
  for (int64_t i = 0; i < N; ++i) {
    const float* row = logits + i * V;
    float* drow = dlogits + i * V;
    const float k = scale * coef[i], l = lse[i];
    for (int64_t v = 0; v < V; ++v) drow[v] = k * std::exp(row[v] - l);
    if (target[i] >= 0) drow[target[i]] -= k;
  }
}

}  // namespace kiln::ops
