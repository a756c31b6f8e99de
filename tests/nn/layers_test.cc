#include <gtest/gtest.h>

#include <cstring>

#include "grad_check.h"
#include "kiln/core/error.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/gelu.h"
#include "kiln/nn/layernorm.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/tanh.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr double kTol = 2e-2;

TEST(Linear, RegistersHuggingFaceNamesAndShapes) {
  ParamStore store;
  nn::Linear a(store, "bert.pooler.dense", 4, 3);
  nn::Linear b(store, "cls.nobias", 4, 3, false);
  ASSERT_NE(store.find("bert.pooler.dense.weight"), nullptr);
  EXPECT_EQ(store.find("bert.pooler.dense.weight")->shape, (Shape{3, 4}));
  EXPECT_TRUE(store.find("bert.pooler.dense.weight")->decay);
  EXPECT_FALSE(store.find("bert.pooler.dense.bias")->decay);
  EXPECT_EQ(store.find("cls.nobias.bias"), nullptr);
  EXPECT_EQ(b.bias.id, -1);
}

TEST(Linear, ForwardMatchesFloat64Reference) {
  ParamStore store;
  nn::Linear lin(store, "l", 13, 6);
  store.allocate();
  randomize_params(store, 1, 0.5f);
  Tensor x = random_tensor({9, 13}, 2);
  Tensor y = lin.forward(Step{}, x);
  std::vector<double> want(9 * 6);
  for (int n = 0; n < 9; ++n)
    for (int o = 0; o < 6; ++o) {
      double acc = lin.bias.w()[o];
      for (int i = 0; i < 13; ++i) acc += double(x.ptr<float>()[n * 13 + i]) * lin.weight.w()[o * 13 + i];
      want[n * 6 + o] = acc;
    }
  EXPECT_LT(max_rel_error(y.ptr<float>(), want), 1e-5);
}

TEST(Linear, GradientMatchesFiniteDifferences) {
  for (bool bias : {true, false}) {
    ParamStore store;
    nn::Linear lin(store, "l", 7, 5, bias);
    store.allocate();
    randomize_params(store, 3, 0.5f);
    Tensor x = random_tensor({6, 7}, 4);
    const auto r = random_normal(6 * 5, 5);
    const Step step;
    lin.forward(step, x);
    Tensor dx = lin.backward(step, random_tensor({6, 5}, 5));
    std::vector<GradTarget> targets = {tensor_target("x", x, dx), param_target(lin.weight)};
    if (bias) targets.push_back(param_target(lin.bias));
    auto loss = [&] { return weighted_sum(lin.forward(step, x), r); };
    std::string worst;
    EXPECT_LT(max_grad_error(loss, targets, 1e-2f, 24, &worst), kTol) << worst;
  }
}

TEST(Linear, BackwardAccumulatesParameterGradients) {
  ParamStore store;
  nn::Linear lin(store, "l", 4, 3);
  store.allocate();
  randomize_params(store, 6, 1.0f);
  Tensor x = random_tensor({5, 4}, 7), dy = random_tensor({5, 3}, 8);
  lin.forward(Step{}, x);
  lin.backward(Step{}, dy);
  const std::vector<float> once = store.grads_vector();
  lin.backward(Step{}, dy);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(store.host_grads()[i], 2 * once[i]);
}

TEST(GradCheck, DetectsAWrongGradient) {
  // The checker must fail on a gradient that is off by 5%, or it proves nothing.
  ParamStore store;
  nn::Linear lin(store, "l", 7, 5);
  store.allocate();
  randomize_params(store, 9, 0.5f);
  Tensor x = random_tensor({6, 7}, 10);
  const auto r = random_normal(6 * 5, 11);
  lin.forward(Step{}, x);
  Tensor dy = Tensor::empty({6, 5});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  lin.backward(Step{}, dy);
  auto target = param_target(lin.weight);
  auto loss = [&] { return weighted_sum(lin.forward(Step{}, x), r); };
  EXPECT_LT(max_grad_error(loss, {target}), 1e-2);
  for (float& g : target.grad) g *= 1.05f;
  EXPECT_GT(max_grad_error(loss, {target}), kTol);
}

TEST(Embedding, GathersRowsAndScatterAddsGradient) {
  ParamStore store;
  nn::Embedding emb(store, "bert.embeddings.word_embeddings.weight", 10, 6);
  store.allocate();
  randomize_params(store, 12, 1.0f);
  const std::vector<int32_t> ids = {3, 0, 9, 3, 3, 5};
  const Tensor ids_t = Tensor::view(const_cast<int32_t*>(ids.data()), {6}, DType::i32);
  Tensor y = emb.forward(Step{}, ids_t);
  ASSERT_EQ(y.shape, (Shape{6, 6}));
  for (int i = 0; i < 6; ++i)
    for (int c = 0; c < 6; ++c) ASSERT_EQ(y.ptr<float>()[i * 6 + c], emb.weight.w()[ids[i] * 6 + c]);
  const auto r = random_normal(36, 13);
  Tensor dy = Tensor::empty({6, 6});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  emb.backward(Step{}, dy);
  auto loss = [&] { return weighted_sum(emb.forward(Step{}, ids_t), r); };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, {param_target(emb.weight)}, 1e-2f, 60, &worst), 1e-3) << worst;
}

TEST(LayerNorm, GradientMatchesFiniteDifferences) {
  ParamStore store;
  nn::LayerNorm ln(store, "x.LayerNorm", 9);
  EXPECT_FALSE(store.find("x.LayerNorm.weight")->decay);
  store.allocate();
  randomize_params(store, 14, 0.5f);
  Tensor x = random_tensor({4, 9}, 15, 2.0f);
  const auto r = random_normal(36, 16);
  Tensor dy = Tensor::empty({4, 9});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  const Step step;
  ln.forward(step, x);
  Tensor dx = ln.backward(step, dy);
  auto loss = [&] { return weighted_sum(ln.forward(step, x), r); };
  std::string worst;
  EXPECT_LT(max_grad_error(loss,
                           {tensor_target("x", x, dx), param_target(ln.weight),
                            param_target(ln.bias)},
                           1e-2f, 36, &worst),
            kTol)
      << worst;
}

TEST(Gelu, GradientMatchesFiniteDifferencesForBothKinds) {
  for (auto kind : {nn::GeluKind::erf, nn::GeluKind::tanh}) {
    nn::Gelu gelu(kind);
    Tensor x = random_tensor({5, 7}, 17, 2.0f);
    const auto r = random_normal(35, 18);
    Tensor dy = Tensor::empty({5, 7});
    std::copy(r.begin(), r.end(), dy.ptr<float>());
    gelu.forward(Step{}, x);
    Tensor dx = gelu.backward(Step{}, dy);
    auto loss = [&] { return weighted_sum(gelu.forward(Step{}, x), r); };
    std::string worst;
    EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-2f, 35, &worst), kTol)
        << worst;
  }
}

TEST(Tanh, GradientMatchesFiniteDifferences) {
  nn::Tanh act;
  Tensor x = random_tensor({3, 11}, 19, 1.5f);
  const auto r = random_normal(33, 20);
  Tensor dy = Tensor::empty({3, 11});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  act.forward(Step{}, x);
  Tensor dx = act.backward(Step{}, dy);
  auto loss = [&] { return weighted_sum(act.forward(Step{}, x), r); };
  EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-2f, 33), kTol);
}

TEST(Dropout, GradientMatchesFiniteDifferencesWithFixedMask) {
  nn::Dropout drop(0.3f, 5);
  const Step step{99, 4, true};
  Tensor x = random_tensor({8, 8}, 21);
  const auto r = random_normal(64, 22);
  Tensor dy = Tensor::empty({8, 8});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  Tensor y = drop.forward(step, x);
  int zeros = 0;
  for (int i = 0; i < 64; ++i) zeros += y.ptr<float>()[i] == 0.0f;
  EXPECT_GT(zeros, 5);  // the mask is really applied
  EXPECT_LT(zeros, 40);
  Tensor dx = drop.backward(step, dy);
  auto loss = [&] { return weighted_sum(drop.forward(step, x), r); };
  EXPECT_LT(max_grad_error(loss, {tensor_target("x", x, dx)}, 1e-2f, 64), 1e-3);
}

TEST(Dropout, SameSamplesSameMaskAndIdentityWhenNotTraining) {
  nn::Dropout drop(0.5f, 2);
  Tensor x = random_tensor({1000}, 23);
  std::vector<float> a(1000), b(1000), c(1000);
  // Masks follow the global sample index (sample_offset), not the step counter.
  Step s1{1, 10, true}, s2{1, 11, true};
  s2.sample_offset = 1000;
  Tensor y = drop.forward(s1, x);
  std::memcpy(a.data(), y.ptr<float>(), 4000);
  y = drop.forward(s1, x);
  std::memcpy(b.data(), y.ptr<float>(), 4000);
  y = drop.forward(s2, x);
  std::memcpy(c.data(), y.ptr<float>(), 4000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int kept = 0;
  for (float v : a) kept += v != 0.0f;
  EXPECT_NEAR(kept, 500, 80);  // Binomial(1000, 0.5): sd ~16
  const Step eval{1, 10, false};
  y = drop.forward(eval, x);
  EXPECT_EQ(y.data, x.data);
  EXPECT_EQ(drop.backward(eval, x).data, x.data);
  EXPECT_THROW(nn::Dropout(1.0f, 0), Error);
}

TEST(Dropout, MaskOfASampleDoesNotDependOnItsMicroBatch) {
  nn::Dropout drop(0.3f, 4);
  Tensor x = random_tensor({6 * 5, 7}, 24);  // 6 samples of 5 rows each, sample-major
  Step whole{3, 0, true};
  whole.sample_offset = 12;
  Tensor y = drop.forward(whole, x, 6);
  const std::vector<float> all(y.ptr<float>(), y.ptr<float>() + y.numel());
  // The same samples as micro-batches of 2, at another step index.
  for (int64_t m = 0; m < 3; ++m) {
    Step part{3, 77 + uint64_t(m), true};
    part.sample_offset = 12 + 2 * m;
    Tensor piece = drop.forward(part, x.slice_rows(m * 10, m * 10 + 10), 2);
    for (int64_t i = 0; i < piece.numel(); ++i)
      ASSERT_EQ(piece.ptr<float>()[i], all[size_t(m * 70 + i)]) << "micro-batch " << m;
  }
}

}  // namespace
}  // namespace kiln
