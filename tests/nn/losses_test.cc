#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.h"
#include "kiln/core/error.h"
#include "kiln/nn/losses.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(MlmLoss, MatchesFloat64ReferenceAndGradient) {
  const int64_t N = 6, V = 11;
  Tensor logits = random_tensor({N, V}, 70, 2.0f);
  const std::vector<int32_t> ids = {3, 10, 0, 5, 5, 1};
  const std::vector<float> w = {1, 1, 0, 1, 0.5f, 1};
  nn::MlmLoss mlm;
  const auto res = mlm.forward(logits, ids.data(), w.data());
  double nll = 0, wsum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float* row = logits.ptr<float>() + i * V;
    double sum = 0;
    int64_t best = 0;
    for (int64_t v = 0; v < V; ++v) {
      sum += std::exp(double(row[v]));
      if (row[v] > row[best]) best = v;
    }
    nll -= w[i] * (row[ids[i]] - std::log(sum));
    wsum += w[i];
    correct += w[i] > 0 && best == ids[i];
  }
  EXPECT_NEAR(res.loss, nll / (wsum + 1e-5), 1e-6);
  EXPECT_EQ(res.correct, correct);
  EXPECT_DOUBLE_EQ(res.count, wsum);

  Tensor d = mlm.backward(2.0f);
  auto loss = [&] { return 2.0 * mlm.forward(logits, ids.data(), w.data()).loss; };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, {tensor_target("logits", logits, d)}, 1e-2f, 66, &worst), 2e-2)
      << worst;
  const std::vector<int32_t> bad = {3, 11, 0, 5, 5, 1};
  EXPECT_THROW(mlm.forward(logits, bad.data(), w.data()), Error);
}

TEST(MlmLoss, CountsCorrectPredictions) {
  Tensor logits = Tensor::zeros({3, 4});
  logits.ptr<float>()[0 * 4 + 2] = 5.0f;  // row 0 predicts 2
  logits.ptr<float>()[1 * 4 + 1] = 5.0f;  // row 1 predicts 1
  logits.ptr<float>()[2 * 4 + 3] = 5.0f;  // row 2 predicts 3 (weight 0: not counted)
  const std::vector<int32_t> ids = {2, 0, 3};
  const std::vector<float> w = {1, 1, 0};
  nn::MlmLoss mlm;
  EXPECT_EQ(mlm.forward(logits, ids.data(), w.data()).correct, 1);
}

TEST(NspLoss, MatchesFloat64ReferenceIgnoresMinusOneAndGradient) {
  const int64_t B = 5;
  Tensor logits = random_tensor({B, 2}, 71, 1.5f);
  const std::vector<int32_t> labels = {0, 1, -1, 1, 0};
  nn::NspLoss nsp;
  const auto res = nsp.forward(logits, labels.data());
  double nll = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < B; ++i) {
    if (labels[i] < 0) continue;
    const float* row = logits.ptr<float>() + i * 2;
    nll -= row[labels[i]] - std::log(std::exp(double(row[0])) + std::exp(double(row[1])));
    correct += (row[1] > row[0] ? 1 : 0) == labels[i];
  }
  EXPECT_NEAR(res.loss, nll / 4, 1e-6);
  EXPECT_EQ(res.correct, correct);
  EXPECT_EQ(res.count, 4);

  Tensor d = nsp.backward(0.5f);
  EXPECT_EQ(d.ptr<float>()[4], 0.0f);  // the ignored row
  EXPECT_EQ(d.ptr<float>()[5], 0.0f);
  auto loss = [&] { return 0.5 * nsp.forward(logits, labels.data()).loss; };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, {tensor_target("logits", logits, d)}, 1e-2f, 10, &worst), 2e-2)
      << worst;

  const std::vector<int32_t> none = {-1, -1, -1, -1, -1};
  EXPECT_EQ(nsp.forward(logits, none.data()).loss, 0.0);
  const std::vector<int32_t> bad = {0, 2, 0, 0, 0};
  EXPECT_THROW(nsp.forward(logits, bad.data()), Error);
}

}  // namespace
}  // namespace kiln
