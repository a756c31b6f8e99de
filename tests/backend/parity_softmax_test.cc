// Parity of the row softmax (forward / backward) and BERT's attention softmax, which takes
// the (B, S) i32 input mask directly, for f32 / bf16 / f16 storage.
#include <cmath>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

// softmax(x + bias) of one row in float64.
std::vector<double> softmax_ref(const double* x, const std::vector<double>& bias, int64_t n) {
  std::vector<double> y(static_cast<size_t>(n));
  double mx = -1e300, sum = 0;
  for (int64_t c = 0; c < n; ++c) mx = std::max(mx, x[c] + bias[size_t(c)]);
  for (int64_t c = 0; c < n; ++c) sum += (y[size_t(c)] = std::exp(x[c] + bias[size_t(c)] - mx));
  for (auto& v : y) v /= sum;
  return y;
}

TEST(ParitySoftmax, RowSoftmaxForwardAndBackwardInEveryDtype) {
  Parity p;
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {17, 65}, {130, 257}, {8, 1000}};
  for (DType dt : testing::float_dtypes())
    for (const auto& s : shapes) {
      const int64_t R = s[0], C = s[1];
      const Tensor x = p.random({R, C}, dt, 1, 3.0f), dy = p.random({R, C}, dt, 2);
      Tensor y = p.zeros({R, C}, dt);
      ops::softmax_forward(p.ctx, x, y);
      const auto hx = p.host(x), hy = p.host(y), hdy = p.host(dy);
      std::vector<double> want, dwant(size_t(R * C));
      const std::vector<double> zero(size_t(C), 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const auto row = softmax_ref(hx.data() + r * C, zero, C);
        want.insert(want.end(), row.begin(), row.end());
        double dot = 0;  // backward from the stored y, as the op defines it
        for (int64_t c = 0; c < C; ++c) dot += hy[size_t(r * C + c)] * hdy[size_t(r * C + c)];
        for (int64_t c = 0; c < C; ++c)
          dwant[size_t(r * C + c)] = 0.5 * hy[size_t(r * C + c)] * (hdy[size_t(r * C + c)] - dot);
      }
      p.expect_close(y, want, "softmax_forward");
      Tensor dx = p.zeros({R, C}, dt);
      ops::softmax_backward(p.ctx, y, dy, 0.5f, dx);
      p.expect_close(dx, dwant, "softmax_backward");
    }
}

TEST(ParitySoftmax, AttentionSoftmaxMasksPaddedKeysFromTheI32Mask) {
  Parity p;
  const int64_t B = 3, heads = 2, Sq = 5, Sk = 6;
  const std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1,  1, 1, 1, 0, 0, 0,  1, 0, 1, 0, 1, 1};
  const Tensor m =
      p.to_device(Tensor::view(const_cast<int32_t*>(mask.data()), {B, Sk}, DType::i32));
  for (DType in : {DType::f32, DType::bf16})
    for (DType out : testing::float_dtypes()) {
      const Tensor scores = p.random({B, heads, Sq, Sk}, in, 3, 2.0f);
      Tensor probs = p.zeros(scores.shape, out);
      ops::attention_softmax_forward(p.ctx, scores, m, probs);
      const auto hs = p.host(scores);
      std::vector<double> want;
      for (int64_t r = 0; r < B * heads * Sq; ++r) {
        const int64_t b = r / (heads * Sq);
        std::vector<double> bias(static_cast<size_t>(Sk));
        for (int64_t k = 0; k < Sk; ++k) bias[size_t(k)] = mask[size_t(b * Sk + k)] ? 0.0 : -10000.0;
        const auto row = softmax_ref(hs.data() + r * Sk, bias, Sk);
        want.insert(want.end(), row.begin(), row.end());
      }
      p.expect_close(probs, want, fmt::format("attention softmax {} -> {}", dtype_name(in), dtype_name(out)));
    }
  // In place (f32) and shape checks.
  Tensor s = p.random({B, heads, Sq, Sk}, DType::f32, 4);
  const auto before = p.host(s);
  ops::attention_softmax_forward(p.ctx, s, m, s);
  EXPECT_NE(p.host(s), before);
  Tensor wrong = p.zeros({B, heads, Sq, Sk + 1}, DType::f32);
  EXPECT_THROW(ops::attention_softmax_forward(p.ctx, wrong, m, wrong), Error);
}

}  // namespace
}  // namespace kiln
