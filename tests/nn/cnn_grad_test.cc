// CNN layers (nn/{conv2d,batchnorm2d,relu,pool,cross_entropy}): finite-difference gradient
// checks, parameter registration, running statistics and the label-smoothed loss.
#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.h"
#include "kiln/core/error.h"
#include "kiln/nn/batchnorm2d.h"
#include "kiln/nn/conv2d.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/nn/pool.h"
#include "kiln/nn/relu.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr double kTol = 2e-2;

TEST(CnnLayers, Conv2dRegistersTorchLayoutAndDecay) {
  ParamStore store;
  nn::Conv2d a(store, "layer1.0.conv2", {8, 12, 3, 2, 1, 1, 2, false});
  nn::Conv2d b(store, "head", {4, 6, 1, 1, 0, 1, 1, true});
  EXPECT_EQ(store.find("layer1.0.conv2.weight")->shape, (Shape{12, 4, 3, 3}));
  EXPECT_TRUE(store.find("layer1.0.conv2.weight")->decay);
  EXPECT_EQ(store.find("layer1.0.conv2.bias"), nullptr);
  EXPECT_FALSE(store.find("head.bias")->decay);
  EXPECT_THROW(nn::Conv2d(store, "bad", {6, 8, 3, 1, 1, 1, 4, false}), Error);
}

TEST(CnnLayers, Conv2dGradientMatchesFiniteDifferences) {
  const std::vector<nn::Conv2dOptions> opts = {
      {3, 5, 3, 1, 1, 1, 1, true},   // 3x3 same, bias
      {4, 6, 3, 2, 1, 1, 2, false},  // stride 2, groups 2
      {4, 4, 3, 1, 2, 2, 4, false},  // depthwise, dilation 2
      {5, 3, 1, 2, 0, 1, 1, false},  // 1x1 stride 2 (a downsample)
  };
  uint32_t id = 500;
  for (const auto& o : opts) {
    SCOPED_TRACE(::testing::Message() << "kernel " << o.kernel << " stride " << o.stride
                                      << " groups " << o.groups << " dilation " << o.dilation);
    ParamStore store;
    nn::Conv2d conv(store, "conv", o);
    store.allocate();
    randomize_params(store, id++, 0.5f);
    Tensor x = random_tensor({2, 6, 5, o.in}, id++);
    const Step step;
    const Tensor y = conv.forward(step, x);
    const auto r = random_normal(y.numel(), id++);
    Tensor dy = random_tensor(y.shape, 0);
    std::copy(r.begin(), r.end(), dy.ptr<float>());
    store.zero_grad();
    Tensor dx = conv.backward(step, dy);
    std::vector<GradTarget> targets = {tensor_target("x", x, dx), param_target(conv.weight)};
    if (o.bias) targets.push_back(param_target(conv.bias));
    auto loss = [&] { return weighted_sum(conv.forward(step, x), r); };
    std::string worst;
    EXPECT_LT(max_grad_error(loss, targets, 1e-2f, 24, &worst), kTol) << worst;
    // A wrong gradient is caught.
    targets[1].grad[0] *= 1.1f;
    targets[1].grad[0] += 0.05f;
    EXPECT_GT(max_grad_error(loss, {targets[1]}, 1e-2f, 24), kTol);
  }
}

TEST(CnnLayers, BatchNorm2dGradientMatchesFiniteDifferencesTrainAndEval) {
  uint32_t id = 600;
  for (bool training : {true, false})
    for (bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "training " << training << " relu " << relu);
      ParamStore store;
      nn::BatchNorm2d bn(store, "bn1", 4, relu);
      store.allocate();
      const auto gamma = random_normal(4, id++, 0.3f), beta = random_normal(4, id++, 0.3f);
      for (int c = 0; c < 4; ++c) {
        bn.weight.w()[c] = 1.0f + gamma[c];
        bn.bias.w()[c] = beta[c];
        bn.running_mean.ptr<float>()[c] = 0.2f * gamma[c];
        bn.running_var.ptr<float>()[c] = 1.0f + std::abs(beta[c]);
      }
      Tensor x = random_tensor({3, 4, 3, 4}, id++);
      Step step;
      step.training = training;
      // Running statistics must not move during the finite differences; save and restore.
      const auto rm = to_float_vector(bn.running_mean), rv = to_float_vector(bn.running_var);
      const Tensor y = bn.forward(step, x);
      const auto r = random_normal(y.numel(), id++);
      Tensor dy = random_tensor(y.shape, id++);
      std::copy(r.begin(), r.end(), dy.ptr<float>());
      Tensor dx = bn.backward(step, dy);
      std::vector<GradTarget> targets = {tensor_target("x", x, dx), param_target(bn.weight),
                                         param_target(bn.bias)};
      auto loss = [&] {
        std::copy(rm.begin(), rm.end(), bn.running_mean.ptr<float>());
        std::copy(rv.begin(), rv.end(), bn.running_var.ptr<float>());
        return weighted_sum(bn.forward(step, x), r);
      };
      std::string worst;
      EXPECT_LT(max_grad_error(loss, targets, relu ? 1e-3f : 1e-2f, 48, &worst), kTol) << worst;
    }
}

TEST(CnnLayers, BatchNorm2dUpdatesRunningStatsLikePyTorch) {
  ParamStore store;
  nn::BatchNorm2d bn(store, "layer1.0.downsample.1", 3);
  store.allocate();
  bn.reset();
  Tensor x = random_tensor({2, 3, 2, 3}, 700);  // 12 rows
  Step step;
  bn.forward(step, x);
  bn.forward(step, x);
  for (int c = 0; c < 3; ++c) {
    double mean = 0, ss = 0;
    for (int r = 0; r < 12; ++r) mean += x.ptr<float>()[r * 3 + c] / 12.0;
    for (int r = 0; r < 12; ++r) ss += std::pow(x.ptr<float>()[r * 3 + c] - mean, 2);
    const double unbiased = ss / 11.0;
    // Two updates with momentum 0.1 from (0, 1).
    EXPECT_NEAR(bn.running_mean.ptr<float>()[c], 0.19 * mean, 1e-6);
    EXPECT_NEAR(bn.running_var.ptr<float>()[c], 0.81 + 0.19 * unbiased, 1e-6);
  }
  EXPECT_EQ(bn.num_batches_tracked.ptr<float>()[0], 2.0f);
  const auto bufs = bn.buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].first, "layer1.0.downsample.1.running_mean");
  EXPECT_EQ(bufs[1].first, "layer1.0.downsample.1.running_var");
  EXPECT_EQ(bufs[2].first, "layer1.0.downsample.1.num_batches_tracked");
  EXPECT_FALSE(store.find("layer1.0.downsample.1.weight")->decay);
  EXPECT_EQ(store.find("layer1.0.downsample.1.running_mean"), nullptr);  // not a parameter
  // Eval mode leaves the statistics alone and normalises with them.
  step.training = false;
  const auto before = to_float_vector(bn.running_mean);
  const Tensor y = bn.forward(step, x);
  EXPECT_EQ(to_float_vector(bn.running_mean), before);
  const float want =
      (x.ptr<float>()[4] - bn.running_mean.ptr<float>()[1]) / std::sqrt(bn.running_var.ptr<float>()[1] + 1e-5f);
  EXPECT_NEAR(y.ptr<float>()[4], want, 1e-5);
  // A single value per channel cannot be normalised in training.
  step.training = true;
  EXPECT_THROW(bn.forward(step, random_tensor({1, 1, 1, 3}, 701)), Error);
}

TEST(CnnLayers, PoolsAndReluGradientsMatchFiniteDifferences) {
  const Step step;
  {
    nn::MaxPool2d pool(3, 2, 1);
    Tensor x = random_tensor({2, 7, 6, 3}, 800);
    const Tensor y = pool.forward(step, x);
    EXPECT_EQ(y.shape, (Shape{2, 4, 3, 3}));
    const auto r = random_normal(y.numel(), 801);
    Tensor dy = random_tensor(y.shape, 801);
    Tensor dx = pool.backward(step, dy);
    auto loss = [&] { return weighted_sum(pool.forward(step, x), r); };
    EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-3f, 60), kTol);
  }
  {
    nn::GlobalAvgPool pool;
    Tensor x = random_tensor({2, 3, 4, 5}, 810);
    const Tensor y = pool.forward(step, x);
    EXPECT_EQ(y.shape, (Shape{2, 5}));
    const auto r = random_normal(y.numel(), 811);
    Tensor dx = pool.backward(step, random_tensor(y.shape, 811));
    auto loss = [&] { return weighted_sum(pool.forward(step, x), r); };
    EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-2f, 60), kTol);
  }
  {
    nn::Relu relu;
    Tensor x = random_tensor({4, 3, 2, 5}, 820);
    const Tensor y = relu.forward(step, x);
    const auto r = random_normal(y.numel(), 821);
    Tensor dx = relu.backward(step, random_tensor(y.shape, 821));
    auto loss = [&] { return weighted_sum(relu.forward(step, x), r); };
    EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-3f, 120), kTol);
  }
}

// Float64 reference of the label-smoothed loss over rows with label >= 0.
double smoothed_loss(const Tensor& logits, const std::vector<int32_t>& labels, double ls) {
  const int64_t N = logits.dim(0), C = logits.dim(1);
  double total = 0;
  int count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (labels[i] < 0) continue;
    const float* z = logits.ptr<float>() + i * C;
    double mx = z[0], s = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(z[c]));
    for (int64_t c = 0; c < C; ++c) s += std::exp(z[c] - mx);
    const double lse = mx + std::log(s);
    for (int64_t c = 0; c < C; ++c)
      total -= ((c == labels[i] ? 1.0 - ls : 0.0) + ls / C) * (z[c] - lse);
    ++count;
  }
  return total / count;
}

TEST(CnnLayers, LabelSmoothedCrossEntropyMatchesReferenceAndIgnoresPadding) {
  Tensor logits = random_tensor({6, 5}, 900, 2.0f);
  const std::vector<int32_t> labels = {0, 4, -1, 2, -1, 1};
  nn::SoftmaxCrossEntropy xent(0.1f);
  const nn::LossResult r = xent.forward(logits, labels.data());
  EXPECT_NEAR(r.loss, smoothed_loss(logits, labels, 0.1), 1e-6);
  EXPECT_EQ(r.count, 4);
  int correct = 0;
  for (int i = 0; i < 6; ++i) {
    const float* z = logits.ptr<float>() + i * 5;
    if (labels[i] >= 0 && std::max_element(z, z + 5) - z == labels[i]) ++correct;
  }
  EXPECT_EQ(r.correct, correct);
  Tensor d = xent.backward(2.0f);
  for (int c = 0; c < 5; ++c) EXPECT_EQ(d.ptr<float>()[2 * 5 + c], 0.0f);  // padding row
  GradTarget t = tensor_target("logits", logits, d);
  for (float& g : t.grad) g /= 2.0f;
  auto loss = [&] { return xent.forward(logits, labels.data()).loss; };
  EXPECT_LT(max_grad_error(loss, {t}, 1e-2f, 30), 1e-3);
  // Without smoothing it is the plain cross-entropy.
  nn::SoftmaxCrossEntropy plain(0.0f);
  EXPECT_NEAR(plain.forward(logits, labels.data()).loss, smoothed_loss(logits, labels, 0.0), 1e-6);
  const std::vector<int32_t> bad = {0, 5, 0, 0, 0, 0};
  EXPECT_THROW(xent.forward(logits, bad.data()), Error);
}

}  // namespace
}  // namespace kiln
