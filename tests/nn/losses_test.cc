#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "kiln/core/error.h"
#include "kiln/nn/cross_entropy.h"
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

// The f32 loops the loss ops replaced, kept as the bitwise reference: log-sum-exp rounded to
// f32, row terms in double summed in row order, row coefficients rounded to f32.
struct OldXent {
  std::vector<float> lse;
  std::vector<int32_t> argmax;
  OldXent(const Tensor& logits) {
    const int64_t N = logits.dim(0), V = logits.dim(1);
    lse.resize(size_t(N));
    argmax.resize(size_t(N));
    for (int64_t i = 0; i < N; ++i) {
      const float* row = logits.ptr<float>() + i * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v] - row[best]));
      lse[i] = float(double(row[best]) + std::log(sum));
      argmax[i] = int32_t(best);
    }
  }
};

TEST(MlmLoss, IsBitwiseTheOldLoops) {
  const int64_t N = 37, V = 3001;
  Tensor logits = random_tensor({N, V}, 72, 4.0f);
  std::vector<int32_t> ids(N);
  std::vector<float> w(N);
  for (int64_t i = 0; i < N; ++i) ids[i] = int32_t((i * 977) % V), w[i] = i % 7 == 3 ? 0.0f : 1.0f;
  nn::MlmLoss mlm;
  const nn::LossResult r = mlm.forward(logits, ids.data(), w.data());
  const OldXent old(logits);
  double nll = 0, count = 0;
  for (int64_t i = 0; i < N; ++i) {
    count += w[i];
    nll -= double(w[i]) * (double(logits.ptr<float>()[i * V + ids[i]]) - double(old.lse[i]));
  }
  const double denom = count + 1e-5;
  EXPECT_EQ(r.loss, nll / denom);
  EXPECT_EQ(r.count, count);
  const float dloss = 0.37f;
  const Tensor d = mlm.backward(dloss);
  for (int64_t i = 0; i < N; ++i) {
    const float k = dloss * float(double(w[i]) / denom);
    for (int64_t v = 0; v < V; ++v) {
      float want = k * std::exp(logits.ptr<float>()[i * V + v] - old.lse[i]);
      if (v == ids[i]) want -= k;
      ASSERT_EQ(d.ptr<float>()[i * V + v], want) << i << ", " << v;
    }
  }
}

TEST(SoftmaxCrossEntropy, IsBitwiseTheOldLoopsWithLabelSmoothing) {
  const int64_t N = 29, C = 1000;
  const float ls = 0.1f;
  Tensor logits = random_tensor({N, C}, 73, 3.0f);
  std::vector<int32_t> labels(N);
  for (int64_t i = 0; i < N; ++i) labels[i] = i % 9 == 4 ? -1 : int32_t((i * 331) % C);
  nn::SoftmaxCrossEntropy xent(ls);
  const nn::LossResult r = xent.forward(logits, labels.data());
  const OldXent old(logits);
  double total = 0, count = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (labels[i] < 0) continue;
    const float* z = logits.ptr<float>() + i * C;
    double zsum = 0;
    for (int64_t c = 0; c < C; ++c) zsum += z[c];
    total += double(old.lse[i]) - (1.0 - double(ls)) * double(z[labels[i]]) - double(ls) * zsum / double(C);
    count += 1;
    correct += old.argmax[i] == labels[i];
  }
  EXPECT_EQ(r.loss, total / count);
  EXPECT_EQ(r.correct, correct);
  const float dloss = 1.0f;
  const Tensor d = xent.backward(dloss);
  const float k = float(double(dloss) / count), smooth = ls / float(C);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) {
      float want = 0.0f;
      if (labels[i] >= 0) {
        want = k * (std::exp(logits.ptr<float>()[i * C + c] - old.lse[i]) - smooth);
        if (c == labels[i]) want -= k * (1.0f - ls);
      }
      ASSERT_EQ(d.ptr<float>()[i * C + c], want) << i << ", " << c;
    }
}

}  // namespace
}  // namespace kiln
