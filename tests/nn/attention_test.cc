#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

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

// q, k and v register their weights and biases one after another, at one stride in the flat
// buffers: the three projections run as one batched product (the test above checks its values).
TEST(SelfAttention, ProjectsQueryKeyAndValueInOneProduct) {
  const int64_t B = 2, S = 6, H = 8, heads = 2;
  ParamStore store;
  nn::SelfAttention attn(store, "layer", H, heads, 0.0f, 1);
  store.allocate();
  randomize_params(store, 32, 0.5f);
  const Tensor x = random_tensor({B * S, H}, 33);
  const std::vector<int32_t> mask(size_t(B * S), 1);
  const Tensor mask_t = Tensor::view(const_cast<int32_t*>(mask.data()), {B, S}, DType::i32);
  ops::reset_profile();
  ops::set_profile_recording(true);
  attn.forward(Step{}, x, mask_t);
  ops::set_profile_recording(false);
  const std::string report = ops::profile_report(1.0, 1);
  ops::reset_profile();
  EXPECT_NE(report.find("  matmul | [3x1] 12x8x8 f32->f32 +bias | "), std::string::npos) << report;
  EXPECT_EQ(report.find("  matmul | 12x8x8 f32->f32 +bias | "), std::string::npos) << report;
}

TEST(SelfAttention, GradientMatchesFiniteDifferencesWithPaddingAndDropout) {
  const int64_t B = 2, S = 5, H = 8, heads = 2;
  ParamStore store;
  nn::SelfAttention attn(store, "a", H, heads, 0.2f, 3);
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
  std::vector<GradTarget> targets = {tensor_target("x", x, dx)};
  for (const auto* l : {&attn.query, &attn.key, &attn.value}) {
    targets.push_back(param_target(l->weight));
    targets.push_back(param_target(l->bias));
  }
  // The key bias adds q.bk to every score of a row, which softmax ignores: its gradient is
  // zero, and central differences there are pure rounding noise.
  targets.erase(targets.begin() + 4);
  for (int64_t i = 0; i < H; ++i) EXPECT_LT(std::abs(attn.key.bias.g()[i]), 1e-5f);
  auto loss = [&] { return weighted_sum(attn.forward(step, x, mask_t), r); };
  std::string worst;
  EXPECT_LT(max_grad_error(loss, targets, 1e-2f, 24, &worst), 2e-2) << worst;
}

}  // namespace
}  // namespace kiln
