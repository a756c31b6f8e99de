#include <gtest/gtest.h>

#include <cmath>

#include "kiln/backend/backend.h"
#include "random_fill.h"

namespace kiln {
namespace {

using testing::max_rel_error;
using testing::random_normal;

TEST(LossOps, LogSumExpAndXentGradientMatchFloat64Reference) {
  const int64_t N = 6, V = 1000;
  const auto logits = random_normal(N * V, 25, 3.0f);
  std::vector<float> lse(N), coef = {0.5f, 1.0f, 0.0f, 2.0f, 1.0f, 0.25f}, d(N * V);
  std::vector<int32_t> argmax(N), target = {3, 999, 0, -1, 500, 7};
  ops::logsumexp_rows(logits.data(), N, V, lse.data(), argmax.data());
  ops::softmax_xent_backward(logits.data(), lse.data(), target.data(), coef.data(), 2.0f, N, V,
                             d.data());
  std::vector<double> d_ref(N * V);
  for (int64_t i = 0; i < N; ++i) {
    double sum = 0;
    int64_t best = 0;
    for (int64_t v = 0; v < V; ++v) {
      sum += std::exp(double(logits[i * V + v]));
      if (logits[i * V + v] > logits[i * V + best]) best = v;
    }
    EXPECT_NEAR(lse[i], std::log(sum), 1e-5);
    EXPECT_EQ(argmax[i], best);
    for (int64_t v = 0; v < V; ++v)
      d_ref[i * V + v] = 2.0 * coef[i] * (std::exp(double(logits[i * V + v])) / sum -
                                          (v == target[i] ? 1.0 : 0.0));
  }
  EXPECT_LT(max_rel_error(d, d_ref), 1e-5);
}

}  // namespace
}  // namespace kiln
