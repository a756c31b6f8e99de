// Parity of the softmax cross-entropy ops (forward totals, log-sum-exp, per-row gradient) for
// logits and dlogits in every float dtype, with label smoothing, ignored rows and row weights.
#include <cmath>
#include <cstring>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

struct XentCase {
  int64_t N, V;
  float smoothing;
  bool weighted;
};

// Labels in [0, V) with every fifth row ignored (-1); weights in {0, 0.5, 1, 2}.
std::vector<int32_t> case_labels(int64_t N, int64_t V) {
  std::vector<int32_t> y(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) y[i] = i % 5 == 3 ? -1 : int32_t((i * 7919) % V);
  return y;
}
std::vector<float> case_weights(int64_t N) {
  const float w[] = {1.0f, 0.5f, 0.0f, 2.0f};
  std::vector<float> v(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) v[i] = w[i % 4];
  return v;
}

std::vector<double> read_totals(Parity& p, const Tensor& totals) {
  double host[3];
  Tensor view = Tensor::view(host, {3}, DType::i64);
  ops::copy(p.ctx, totals, view);
  return {host[0], host[1], host[2]};
}

Tensor device_i32(Parity& p, std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::i32, p.ctx.device);
  ops::copy(p.ctx, Tensor::view(v.data(), {int64_t(v.size())}, DType::i32), t);
  return t;
}

TEST(ParityLosses, SoftmaxXentMatchesFloat64ReferenceInEveryDtype) {
  Parity p;
  const XentCase cases[] = {{1, 1, 0.0f, false}, {7, 13, 0.1f, true},  {33, 1000, 0.0f, true},
                            {64, 257, 0.2f, false}, {20, 5000, 0.1f, true}};
  uint32_t id = 10;
  for (const XentCase& c : cases)
    for (DType dt : testing::float_dtypes()) {
      const int64_t N = c.N, V = c.V;
      const Tensor logits = p.random({N, V}, dt, ++id, 3.0f);
      std::vector<int32_t> y = case_labels(N, V);
      const std::vector<float> wv = case_weights(N);
      const Tensor labels = device_i32(p, y);
      const Tensor weights = c.weighted ? p.from_host(wv, {N}, DType::f32) : Tensor{};
      Tensor lse = p.zeros({N}, DType::f32), totals = Tensor::empty({3}, DType::i64, p.ctx.device);
      ops::softmax_xent_forward(p.ctx, logits, labels, weights, c.smoothing, lse, totals);
      // The divisor comes from the totals on the device: Σ w + 3.5.
      const double scale = 0.75, add = 3.5;
      Tensor d = p.zeros({N, V}, dt);
      ops::softmax_xent_backward(p.ctx, logits, lse, labels, weights, c.smoothing, float(scale),
                                 totals, {add, 0.0}, d);

      const std::vector<double> z = p.host(logits);
      std::vector<double> lse_ref(N), d_ref(size_t(N * V), 0.0);
      double loss = 0, wsum = 0, correct = 0;
      for (int64_t i = 0; i < N; ++i)
        if (y[i] >= 0) wsum += c.weighted ? wv[i] : 1.0;
      const double norm = wsum + add;
      for (int64_t i = 0; i < N; ++i) {
        const double* row = z.data() + i * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; ++v)
          if (row[v] > row[best]) best = v;
        double sum = 0, zsum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - row[best]), zsum += row[v];
        lse_ref[i] = row[best] + std::log(sum);
        if (y[i] < 0) continue;
        const double w = c.weighted ? wv[i] : 1.0;
        loss += w * (lse_ref[i] - (1 - c.smoothing) * row[y[i]] - c.smoothing * zsum / V);
        correct += w > 0 && best == y[i];
        for (int64_t v = 0; v < V; ++v)
          d_ref[i * V + v] = scale * w / norm *
                             (std::exp(row[v] - lse_ref[i]) - c.smoothing / V -
                              (v == y[i] ? 1.0 - c.smoothing : 0.0));
      }
      const std::string what = "softmax_xent N=" + std::to_string(N) + " V=" + std::to_string(V);
      p.expect_close(lse, lse_ref, what + " lse", 1e-6);
      p.expect_close(d, d_ref, what + " dlogits");
      const std::vector<double> t = read_totals(p, totals);
      EXPECT_NEAR(t[0], loss, 1e-5 * std::max(1.0, std::abs(loss))) << what;
      EXPECT_EQ(t[1], wsum) << what;
      EXPECT_EQ(t[2], correct) << what;
    }
}

TEST(ParityLosses, SoftmaxXentIgnoredRowsGetZeroGradientAndNoLoss) {
  Parity p;
  const int64_t N = 4, V = 9;
  const Tensor logits = p.random({N, V}, DType::f32, 3);
  std::vector<int32_t> y = {-1, -1, -1, -1};
  const Tensor labels = device_i32(p, y);
  Tensor lse = p.zeros({N}, DType::f32), totals = Tensor::empty({3}, DType::i64, p.ctx.device);
  ops::softmax_xent_forward(p.ctx, logits, labels, Tensor{}, 0.1f, lse, totals);
  EXPECT_EQ(read_totals(p, totals), (std::vector<double>{0, 0, 0}));
  Tensor d = p.random({N, V}, DType::f32, 4);
  ops::softmax_xent_backward(p.ctx, logits, lse, labels, Tensor{}, 0.1f, 1.0f, totals, {0.0, 1.0}, d);
  EXPECT_EQ(p.host(d), std::vector<double>(size_t(N * V), 0.0));
}

// The CPU backend reads the labels and throws; the CUDA backend keeps them on the device and
// makes the loss NaN instead (no host read in the step).
TEST(ParityLosses, SoftmaxXentRefusesLabelsOutsideTheRowAndBadShapes) {
  Parity p;
  const Tensor logits = p.random({3, 5}, DType::f32, 5);
  std::vector<int32_t> y = {0, 5, 1};
  const Tensor labels = device_i32(p, y);
  Tensor lse = p.zeros({3}, DType::f32), totals = Tensor::empty({3}, DType::i64, p.ctx.device);
  if (p.ctx.device.cpu_kernels()) {  // the CPU backend reads labels on the host and refuses them
    EXPECT_THROW(ops::softmax_xent_forward(p.ctx, logits, labels, Tensor{}, 0.0f, lse, totals),
                 Error);
  } else {
    ops::softmax_xent_forward(p.ctx, logits, labels, Tensor{}, 0.0f, lse, totals);
    EXPECT_TRUE(std::isnan(read_totals(p, totals)[0]));
  }
  std::vector<int32_t> short_y = {0, 1};
  const Tensor short_labels = device_i32(p, short_y);
  EXPECT_THROW(ops::softmax_xent_forward(p.ctx, logits, short_labels, Tensor{}, 0.0f, lse, totals),
               Error);
}

}  // namespace
}  // namespace kiln
