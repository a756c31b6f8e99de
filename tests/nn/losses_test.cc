#include <gtest/gtest.h>

#include <algorithm>
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

// Float64 reference: log-sum-exp and the first index of each row's maximum.
struct RefXent {
  std::vector<double> lse;
  std::vector<int32_t> argmax;
  RefXent(const Tensor& logits) {
    const int64_t N = logits.dim(0), V = logits.dim(1);
    lse.resize(size_t(N));
    argmax.resize(size_t(N));
    for (int64_t i = 0; i < N; ++i) {
      const float* row = logits.ptr<float>() + i * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - double(row[best]));
      lse[size_t(i)] = double(row[best]) + std::log(sum);
      argmax[size_t(i)] = int32_t(best);
    }
  }
};

// The op's gradient is k·(softmax - smooth) - k·hit at the label, within a few f32 ulp of k
// (the log-sum-exp is kept in f32).
void expect_xent_gradient(const Tensor& logits, const Tensor& d, const RefXent& ref,
                          const std::vector<int32_t>& labels, const std::vector<double>& k,
                          double smooth, double hit) {
  const int64_t N = logits.dim(0), V = logits.dim(1);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) {
      double want = 0.0;
      if (labels[size_t(i)] >= 0) {
        want = k[size_t(i)] * (std::exp(double(logits.ptr<float>()[i * V + v]) - ref.lse[size_t(i)]) - smooth);
        if (v == labels[size_t(i)]) want -= k[size_t(i)] * hit;
      }
      ASSERT_NEAR(d.ptr<float>()[i * V + v], want, 2e-6 * std::abs(k[size_t(i)]) + 1e-12) << i << ", " << v;
    }
}

TEST(MlmLoss, MatchesFloat64Reference) {
  const int64_t N = 37, V = 3001;
  Tensor logits = random_tensor({N, V}, 72, 4.0f);
  std::vector<int32_t> ids(N);
  std::vector<float> w(N);
  for (int64_t i = 0; i < N; ++i) ids[i] = int32_t((i * 977) % V), w[i] = i % 7 == 3 ? 0.0f : 1.0f;
  nn::MlmLoss mlm;
  const nn::LossResult r = mlm.forward(logits, ids.data(), w.data());
  const RefXent ref(logits);
  double nll = 0, count = 0;
  for (int64_t i = 0; i < N; ++i) {
    count += w[i];
    nll -= double(w[i]) * (double(logits.ptr<float>()[i * V + ids[i]]) - ref.lse[size_t(i)]);
  }
  const double denom = count + 1e-5;
  EXPECT_NEAR(r.loss, nll / denom, 1e-6 * std::abs(nll / denom));
  EXPECT_EQ(r.count, count);
  const float dloss = 0.37f;
  const Tensor d = mlm.backward(dloss);
  std::vector<double> k(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) k[size_t(i)] = dloss * double(w[i]) / denom;
  expect_xent_gradient(logits, d, ref, ids, k, 0.0, 1.0);
}

TEST(SoftmaxCrossEntropy, MatchesFloat64ReferenceWithLabelSmoothing) {
  const int64_t N = 29, C = 1000;
  const float ls = 0.1f;
  Tensor logits = random_tensor({N, C}, 73, 3.0f);
  std::vector<int32_t> labels(N);
  for (int64_t i = 0; i < N; ++i) labels[i] = i % 9 == 4 ? -1 : int32_t((i * 331) % C);
  nn::SoftmaxCrossEntropy xent(ls);
  const nn::LossResult r = xent.forward(logits, labels.data());
  const RefXent ref(logits);
  double total = 0, count = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (labels[i] < 0) continue;
    const float* z = logits.ptr<float>() + i * C;
    double zsum = 0;
    for (int64_t c = 0; c < C; ++c) zsum += z[c];
    total += ref.lse[size_t(i)] - (1.0 - double(ls)) * double(z[labels[i]]) - double(ls) * zsum / double(C);
    count += 1;
    correct += ref.argmax[size_t(i)] == labels[i];
  }
  EXPECT_NEAR(r.loss, total / count, 1e-6 * std::abs(total / count));
  EXPECT_EQ(r.correct, correct);
  const Tensor d = xent.backward(1.0f);
  expect_xent_gradient(logits, d, ref, labels, std::vector<double>(size_t(N), 1.0 / count),
                       double(ls) / double(C), 1.0 - double(ls));
}

// Prediction = the first index of a row's maximum, wherever the ties fall among the op's lanes
// (and in a row shorter than one lane group).
TEST(SoftmaxCrossEntropy, CorrectCountsTheFirstIndexOfTheMaximum) {
  const int64_t C = 100;
  const std::vector<std::vector<int64_t>> maxima = {{5, 37, 90}, {0, 16, 99}, {99}, {64, 65}, {17, 33, 1}};
  Tensor logits = random_tensor({int64_t(maxima.size()), C}, 74, 1.0f);
  std::vector<int32_t> first(maxima.size()), later(maxima.size());
  for (size_t i = 0; i < maxima.size(); ++i) {
    for (int64_t c : maxima[i]) logits.ptr<float>()[int64_t(i) * C + c] = 10.0f;
    first[i] = int32_t(*std::min_element(maxima[i].begin(), maxima[i].end()));
    later[i] = int32_t(*std::max_element(maxima[i].begin(), maxima[i].end()));
  }
  nn::SoftmaxCrossEntropy xent(0.0f);
  EXPECT_EQ(xent.forward(logits, first.data()).correct, int64_t(maxima.size()));
  EXPECT_EQ(xent.forward(logits, later.data()).correct, 1);  // only the row with one maximum
  Tensor small = random_tensor({1, 3}, 75, 1.0f);
  small.ptr<float>()[1] = small.ptr<float>()[2] = 5.0f;
  const std::vector<int32_t> one = {1};
  EXPECT_EQ(xent.forward(small, one.data()).correct, 1);
}

}  // namespace
}  // namespace kiln
