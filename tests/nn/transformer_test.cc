#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "grad_check.h"
#include "kiln/nn/transformer.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr int64_t kB = 2, kS = 4, kH = 8, kHeads = 2, kI = 12;

void check_layer_gradients(bool pre_ln, nn::GeluKind gelu) {
  ParamStore store;
  nn::TransformerLayer layer(store, "bert.encoder.layer.3", kH, kHeads, kI, 0.1f, 0.1f, pre_ln,
                             gelu, 3);
  store.allocate();
  randomize_params(store, 50, 0.4f);
  Tensor x = random_tensor({kB * kS, kH}, 51);
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 0};
  const Tensor mask_t = Tensor::view(const_cast<int32_t*>(mask.data()), {kB, kS}, DType::i32);
  const Step step{11, 7, true};
  const auto r = random_normal(kB * kS * kH, 52);
  Tensor dy = Tensor::empty({kB * kS, kH});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  layer.forward(step, x, mask_t);
  Tensor dx = layer.backward(step, dy);
  std::vector<GradTarget> targets = {tensor_target("x", x, dx)};
  for (const auto& s : store.specs()) {
    Param p{&store, int(&s - store.specs().data())};
    // The key bias gradient is zero (softmax ignores a per-row shift); see attention_test.cc.
    if (s.name.ends_with("key.bias")) {
      for (int64_t i = 0; i < p.numel(); ++i) EXPECT_LT(std::abs(p.g()[i]), 1e-5f);
      continue;
    }
    targets.push_back(param_target(p));
  }
  EXPECT_EQ(targets.size(), 16u);  // x + 15 parameters
  auto loss = [&] { return weighted_sum(layer.forward(step, x, mask_t), r); };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, targets, 1e-2f, 16, &worst), 2e-2) << worst;
}

TEST(TransformerLayer, PostLnGradientMatchesFiniteDifferencesWithDropout) {
  check_layer_gradients(false, nn::GeluKind::erf);
}

TEST(TransformerLayer, PreLnGradientMatchesFiniteDifferencesWithDropout) {
  check_layer_gradients(true, nn::GeluKind::tanh);
}

TEST(TransformerLayer, RegistersHuggingFaceBertNames) {
  ParamStore store;
  nn::TransformerLayer layer(store, "bert.encoder.layer.0", kH, kHeads, kI, 0.1f, 0.1f, false,
                             nn::GeluKind::erf, 0);
  const char* names[] = {
      "attention.self.query.weight",       "attention.self.key.bias",
      "attention.self.value.weight",       "attention.output.dense.weight",
      "attention.output.dense.bias",       "attention.output.LayerNorm.weight",
      "attention.output.LayerNorm.bias",   "intermediate.dense.weight",
      "intermediate.dense.bias",           "output.dense.weight",
      "output.dense.bias",                 "output.LayerNorm.weight",
      "output.LayerNorm.bias"};
  for (const char* n : names)
    EXPECT_NE(store.find(std::string("bert.encoder.layer.0.") + n), nullptr) << n;
  EXPECT_EQ(store.find("bert.encoder.layer.0.intermediate.dense.weight")->shape, (Shape{kI, kH}));
  EXPECT_EQ(store.find("bert.encoder.layer.0.output.dense.weight")->shape, (Shape{kH, kI}));
}

TEST(TransformerLayer, TwoRunsAreBitwiseIdentical) {
  std::vector<float> out[2], grads[2];
  for (int run = 0; run < 2; ++run) {
    ParamStore store;
    nn::TransformerLayer layer(store, "l", 64, 4, 128, 0.1f, 0.1f, false, nn::GeluKind::erf, 1);
    store.allocate();
    randomize_params(store, 60, 0.1f);
    Tensor x = random_tensor({4 * 32, 64}, 61);
    std::vector<int32_t> mask(4 * 32, 1);
    mask[4 * 32 - 1] = 0;
    const Step step{3, 9, true};
    Tensor y = layer.forward(step, x, Tensor::view(mask.data(), {4, 32}, DType::i32));
    out[run].assign(y.ptr<float>(), y.ptr<float>() + y.numel());
    layer.backward(step, random_tensor({4 * 32, 64}, 62));
    grads[run] = store.grads_vector();
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

}  // namespace
}  // namespace kiln
