#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

#include "grad_check.h"
#include "kiln/backend/profile.h"
#include "kiln/nn/attention.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// x (B*S, H) W^T + b in float64.
std::vector<double> linear_ref(const Tensor& x, const nn::Linear& l) {
  const int64_t N = x.dim(0), in = l.in, out = l.out;
  std::vector<double> y(size_t(N * out));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double acc = l.bias.w()[o];
      for (int64_t i = 0; i < in; ++i) acc += double(x.ptr<float>()[n * in + i]) * l.weight.w()[o * in + i];
      y[size_t(n * out + o)] = acc;
    }
  return y;
}

TEST(SelfAttention, ForwardMatchesFloat64ReferenceWithPadding) {
  const int64_t B = 2, S = 6, H = 8, heads = 2, d = 4;
  ParamStore store;
  nn::SelfAttention attn(store, "bert.encoder.layer.0.attention.self", H, heads, 0.0f, 1);
  for (const char* n : {"query", "key", "value"})
    for (const char* p : {"weight", "bias"})
      EXPECT_NE(store.find(std::string("bert.encoder.layer.0.attention.self.") + n + "." + p),
                nullptr);
  store.allocate();
  randomize_params(store, 30, 0.5f);
  Tensor x = random_tensor({B * S, H}, 31);
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  const Tensor mask_t = Tensor::view(const_cast<int32_t*>(mask.data()), {B, S}, DType::i32);
  Tensor ctx = attn.forward(Step{}, x, mask_t);

  const auto q = linear_ref(x, attn.query), k = linear_ref(x, attn.key);
  const auto v = linear_ref(x, attn.value);
  std::vector<double> want(size_t(B * S * H));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> p(S);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t e = 0; e < d; ++e)
            s += q[(b * S + i) * H + h * d + e] * k[(b * S + j) * H + h * d + e];
          p[j] = s / std::sqrt(double(d)) + (mask[b * S + j] ? 0.0 : -10000.0);
          mx = std::max(mx, p[j]);
        }
        for (auto& pj : p) sum += (pj = std::exp(pj - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += p[j] / sum * v[(b * S + j) * H + h * d + e];
          want[(b * S + i) * H + h * d + e] = acc;
        }
      }
  EXPECT_LT(max_rel_error(ctx.ptr<float>(), want), 1e-5);
}

// The profile report of the ops `run` runs.
std::string profile_of(const std::function<void()>& run) {
  ops::reset_profile();
  ops::set_profile_recording(true);
  run();
  ops::set_profile_recording(false);
  const std::string report = ops::profile_report(1.0, 1);
  ops::reset_profile();
  return report;
}

// q, k and v register their weights and biases one after another, at one stride in the flat
// buffers: the three projections run as one batched product, and so do their weight and bias
// gradients (the tests around check their values); dx is still a product per projection.
TEST(SelfAttention, ProjectsQueryKeyAndValueAndTakesTheirWeightGradientsInOneProductEach) {
  const int64_t B = 2, S = 6, H = 8, heads = 2;
  ParamStore store;
  nn::SelfAttention attn(store, "layer", H, heads, 0.0f, 1);
  store.allocate();
  randomize_params(store, 32, 0.5f);
  const Tensor x = random_tensor({B * S, H}, 33), dy = random_tensor({B * S, H}, 34);
  const std::vector<int32_t> mask(size_t(B * S), 1);
  const Tensor mask_t = Tensor::view(const_cast<int32_t*>(mask.data()), {B, S}, DType::i32);
  const std::string forward = profile_of([&] { attn.forward(Step{}, x, mask_t); });
  EXPECT_NE(forward.find("  matmul | [3x1] 12x8x8 f32->f32 +bias | "), std::string::npos) << forward;
  EXPECT_EQ(forward.find("  matmul | 12x8x8 f32->f32 +bias | "), std::string::npos) << forward;
  const std::string backward = profile_of([&] { attn.backward(Step{}, dy); });
  EXPECT_NE(backward.find("  matmul | [3x1] 8x8x12 f32->f32 +bias_grad | "), std::string::npos) << backward;
  EXPECT_EQ(backward.find("  matmul | 8x8x12 f32->f32 +bias_grad | "), std::string::npos) << backward;
}

// The layer's gradients with `core` against central differences, with padding and dropout:
// hidden H over two heads. The key bias adds q.bk to every score of a row, which softmax ignores:
// its gradient is (nearly: `zero` for the core's f32 sums of zero) zero, and central differences
// there are pure rounding noise, so it is checked apart.
void check_gradients(nn::AttentionCore core, int64_t H, float zero) {
  const int64_t B = 2, S = 5, heads = 2;
  ParamStore store;
  nn::SelfAttention attn(store, "a", H, heads, 0.2f, 3);
  attn.core = core;
  store.allocate();
  randomize_params(store, 40, 0.5f);
  Tensor x = random_tensor({B * S, H}, 41);
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  const Tensor mask_t = Tensor::view(const_cast<int32_t*>(mask.data()), {B, S}, DType::i32);
  const Step step{5, 2, true};
  const auto r = random_normal(B * S * H, 42);
  Tensor dy = Tensor::empty({B * S, H});
  std::copy(r.begin(), r.end(), dy.ptr<float>());
  attn.forward(step, x, mask_t);
  Tensor dx = attn.backward(step, dy);
  std::vector<GradTarget> targets = {tensor_target("x", x, dx), param_target(attn.key.weight)};
  for (const auto* l : {&attn.query, &attn.value}) {
    targets.push_back(param_target(l->weight));
    targets.push_back(param_target(l->bias));
  }
  for (int64_t i = 0; i < H; ++i) EXPECT_LT(std::abs(attn.key.bias.g()[i]), zero);
  auto loss = [&] { return weighted_sum(attn.forward(step, x, mask_t), r); };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, targets, 1e-2f, 24, &worst), 2e-2) << worst;
}

TEST(SelfAttention, GradientMatchesFiniteDifferencesWithPaddingAndDropout) {
  check_gradients(nn::AttentionCore::unfused, 8, 1e-5f);
}

// The fused core (ops::flash_attention_*) through the layer (head dim 16, the tiles' smallest).
TEST(SelfAttention, FusedGradientMatchesFiniteDifferencesWithPaddingAndDropout) {
  check_gradients(nn::AttentionCore::fused, 32, 1e-4f);
}

// The fused and the unfused core of one layer give one result: the context, the input gradient
// and every weight gradient, with padding and dropout (the same dropped set, or a context row
// would move by a probability's share of v), with and without recomputation.
TEST(SelfAttention, FusedCoreMatchesTheUnfusedOne) {
  const int64_t B = 2, S = 70, H = 64, heads = 2;
  std::vector<int32_t> mask(size_t(B * S), 1);
  for (int64_t s = 50; s < S; ++s) mask[size_t(S + s)] = 0;
  const Tensor mask_t = Tensor::view(mask.data(), {B, S}, DType::i32);
  const Tensor x = random_tensor({B * S, H}, 51);
  Tensor dy = random_tensor({B * S, H}, 52);
  const Step step{9, 4, true};
  for (bool recompute : {false, true}) {
    std::vector<float> results[2][3];  // per core: context, dx, the weights' gradients
    for (nn::AttentionCore core : {nn::AttentionCore::unfused, nn::AttentionCore::fused}) {
      ParamStore store;
      nn::AttentionBuffers shared;
      nn::SelfAttention attn(store, "a", H, heads, 0.3f, 7, recompute ? &shared : nullptr);
      attn.core = core;
      store.allocate();
      randomize_params(store, 50, 0.5f);
      const Tensor ctx = attn.forward(step, x, mask_t);
      const Tensor dx = attn.backward(step, dy);
      std::vector<float>* out = results[core == nn::AttentionCore::fused];
      out[0].assign(ctx.ptr<float>(), ctx.ptr<float>() + ctx.numel());
      out[1].assign(dx.ptr<float>(), dx.ptr<float>() + dx.numel());
      for (const auto* l : {&attn.query, &attn.key, &attn.value})
        out[2].insert(out[2].end(), l->weight.g(), l->weight.g() + l->weight.numel());
    }
    for (int r = 0; r < 3; ++r) EXPECT_LT(max_rel_error(results[1][r], results[0][r]), 1e-5) << recompute << r;
  }
}

TEST(SelfAttention, AutoTakesTheFusedCoreOnAGpuIn16BitsWithHeadDimsOf16To64) {
  using nn::AttentionCore;
  const auto chosen = [](bool gpu, DType dt, int64_t d) {
    return nn::chosen_core(AttentionCore::automatic, gpu, dt, d);
  };
  EXPECT_EQ(chosen(true, DType::bf16, 64), AttentionCore::fused);
  EXPECT_EQ(chosen(true, DType::f16, 16), AttentionCore::fused);
  EXPECT_EQ(chosen(false, DType::bf16, 64), AttentionCore::unfused);  // the CPU and the simulated device
  EXPECT_EQ(chosen(true, DType::f32, 64), AttentionCore::unfused);
  EXPECT_EQ(chosen(true, DType::bf16, 128), AttentionCore::unfused);
  EXPECT_EQ(chosen(true, DType::bf16, 40), AttentionCore::unfused);
  EXPECT_EQ(nn::chosen_core(AttentionCore::fused, false, DType::f32, 128), AttentionCore::fused);
  EXPECT_EQ(nn::chosen_core(AttentionCore::unfused, true, DType::bf16, 64), AttentionCore::unfused);
}

}  // namespace
}  // namespace kiln
