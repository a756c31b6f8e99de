#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "random_fill.h"

namespace kiln {
namespace {

using testing::max_rel_error;
using testing::random_normal;

const int64_t kShapes[][2] = {{1, 1}, {3, 7}, {17, 65}, {130, 257}, {64, 768}};

TEST(Elementwise, AddScaleBiasMatchFloat64Reference) {
  for (const auto& s : kShapes) {
    const int64_t N = s[0], C = s[1], n = N * C;
    const auto a = random_normal(n, 1), b = random_normal(n, 2), bias = random_normal(C, 3);
    std::vector<float> out(n);
    ops::add(a.data(), b.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
    ops::add_inplace(out.data(), a.data(), n);
    ops::scale_inplace(out.data(), 0.5f, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], 0.5 * (2.0 * a[i] + b[i]), 1e-6);
    std::vector<float> y = a;
    ops::bias_add(y.data(), bias.data(), N, C);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] + bias[i % C]);
  }
}

TEST(Elementwise, BiasGradAccumulatesColumnSums) {
  for (const auto& s : kShapes) {
    const int64_t N = s[0], C = s[1];
    const auto dy = random_normal(N * C, 4);
    std::vector<float> db(C, 1.0f);
    std::vector<double> want(C, 1.0);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < C; ++c) want[c] += dy[r * C + c];
    ops::bias_grad(dy.data(), N, C, db.data());
    EXPECT_LT(max_rel_error(db, want), 1e-6) << N << "x" << C;
  }
}

double gelu_ref(ops::GeluKind kind, double x) {
  if (kind == ops::GeluKind::erf) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, BothKindsMatchFloat64ReferenceAndDerivative) {
  for (auto kind : {ops::GeluKind::erf, ops::GeluKind::tanh}) {
    for (int64_t n : {1, 31, 20000}) {
      const auto x = random_normal(n, 5, 3.0f), dy = random_normal(n, 6);
      std::vector<float> y(n), dx(n);
      std::vector<double> y_ref(n), dx_ref(n);
      for (int64_t i = 0; i < n; ++i) {
        y_ref[i] = gelu_ref(kind, x[i]);
        const double h = 1e-5;  // the float64 derivative by central difference is exact enough
        dx_ref[i] = dy[i] * (gelu_ref(kind, x[i] + h) - gelu_ref(kind, x[i] - h)) / (2 * h);
      }
      ops::gelu_forward(kind, x.data(), n, y.data());
      ops::gelu_backward(kind, x.data(), dy.data(), n, dx.data());
      EXPECT_LT(max_rel_error(y, y_ref), 1e-6);
      EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5);
    }
  }
  // The two kinds really differ (by ~1e-4 at x = 2).
  const float x = 2.0f;
  float ye, yt;
  ops::gelu_forward(ops::GeluKind::erf, &x, 1, &ye);
  ops::gelu_forward(ops::GeluKind::tanh, &x, 1, &yt);
  EXPECT_GT(std::abs(ye - yt), 5e-5);
}

TEST(Tanh, MatchesFloat64Reference) {
  const int64_t n = 10001;
  const auto x = random_normal(n, 7, 2.0f), dy = random_normal(n, 8);
  std::vector<float> y(n), dx(n);
  std::vector<double> y_ref(n), dx_ref(n);
  for (int64_t i = 0; i < n; ++i) {
    y_ref[i] = std::tanh(double(x[i]));
    dx_ref[i] = dy[i] * (1 - y_ref[i] * y_ref[i]);
  }
  ops::tanh_forward(x.data(), n, y.data());
  ops::tanh_backward(y.data(), dy.data(), n, dx.data());
  EXPECT_LT(max_rel_error(y, y_ref), 1e-6);
  EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5);
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesKeptElements) {
  const int64_t n = 200003;
  const float p = 0.1f;
  const std::vector<float> x(n, 1.0f);
  std::vector<float> y(n);
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 3, 17)};
  ops::dropout_forward(x.data(), n, p, rng, y.data());
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool drop = rng.uniform(uint64_t(i)) < p;  // the documented mask
    ASSERT_EQ(y[i], drop ? 0.0f : 1.0f / (1.0f - p)) << i;
    kept += !drop;
  }
  // Binomial(n, 0.9): standard deviation ~134; 6 sigma.
  EXPECT_NEAR(double(kept), 0.9 * n, 800.0);
}

TEST(Dropout, SameStreamSameMaskBackwardUsesIt) {
  const int64_t n = 5000;
  const auto x = random_normal(n, 9), dy = random_normal(n, 10);
  const RngStream a{7, rng_stream(RngPurpose::dropout, 1, 5)};
  const RngStream other_step{7, rng_stream(RngPurpose::dropout, 1, 6)};
  std::vector<float> y1(n), y2(n), y3(n), dx(n);
  ops::dropout_forward(x.data(), n, 0.5f, a, y1.data());
  ops::dropout_forward(x.data(), n, 0.5f, a, y2.data());
  ops::dropout_forward(x.data(), n, 0.5f, other_step, y3.data());
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(y1.data(), y3.data(), n * sizeof(float)), 0);
  ops::dropout_backward(dy.data(), n, 0.5f, a, dx.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dx[i], y1[i] == 0.0f ? 0.0f : 2.0f * dy[i]);
}

// Float64 LayerNorm forward and backward.
void layernorm_reference(const std::vector<float>& x, const std::vector<float>& w,
                         const std::vector<float>& b, const std::vector<float>& dy, int64_t N,
                         int64_t C, double eps, std::vector<double>& y, std::vector<double>& dx,
                         std::vector<double>& dw, std::vector<double>& db) {
  y.assign(N * C, 0);
  dx.assign(N * C, 0);
  dw.assign(C, 0);
  db.assign(C, 0);
  for (int64_t r = 0; r < N; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[r * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
    const double s = 1 / std::sqrt(v / C + eps);
    double mg = 0, mgx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (x[r * C + c] - m) * s, g = dy[r * C + c] * w[c];
      y[r * C + c] = xh * w[c] + b[c];
      mg += g / C;
      mgx += g * xh / C;
      dw[c] += dy[r * C + c] * xh;
      db[c] += dy[r * C + c];
    }
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (x[r * C + c] - m) * s;
      dx[r * C + c] = s * (dy[r * C + c] * w[c] - mg - xh * mgx);
    }
  }
}

TEST(LayerNormOp, MatchesFloat64Reference) {
  for (const auto& sh : kShapes) {
    const int64_t N = sh[0], C = sh[1];
    if (C < 2) continue;
    auto x = random_normal(N * C, 11, 2.0f);
    for (auto& v : x) v += 3.0f;  // a mean offset tests the variance computation
    const auto w = random_normal(C, 12), b = random_normal(C, 13), dy = random_normal(N * C, 14);
    std::vector<float> y(N * C), mean(N), rstd(N), dx(N * C), dw(C, 0.0f), db(C, 0.0f);
    ops::layernorm_forward(x.data(), w.data(), b.data(), 1e-5f, N, C, y.data(), mean.data(),
                           rstd.data());
    ops::layernorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
                            dx.data(), dw.data(), db.data());
    std::vector<double> y_ref, dx_ref, dw_ref, db_ref;
    layernorm_reference(x, w, b, dy, N, C, 1e-5, y_ref, dx_ref, dw_ref, db_ref);
    EXPECT_LT(max_rel_error(y, y_ref), 1e-5) << N << "x" << C;
    EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5) << N << "x" << C;
    EXPECT_LT(max_rel_error(dw, dw_ref), 1e-5) << N << "x" << C;
    EXPECT_LT(max_rel_error(db, db_ref), 1e-5) << N << "x" << C;
  }
}

TEST(LayerNormOp, BackwardIsBitwiseRepeatable) {
  const int64_t N = 300, C = 96;
  const auto x = random_normal(N * C, 15), w = random_normal(C, 16), b = random_normal(C, 17);
  const auto dy = random_normal(N * C, 18);
  std::vector<float> y(N * C), mean(N), rstd(N), dx(N * C);
  ops::layernorm_forward(x.data(), w.data(), b.data(), 1e-12f, N, C, y.data(), mean.data(),
                         rstd.data());
  std::vector<float> dw1(C, 0.0f), db1(C, 0.0f), dw2(C, 0.0f), db2(C, 0.0f);
  ops::layernorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
                          dx.data(), dw1.data(), db1.data());
  ops::layernorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
                          dx.data(), dw2.data(), db2.data());
  EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), C * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(db1.data(), db2.data(), C * sizeof(float)), 0);
}

TEST(Softmax, ForwardAndBackwardMatchFloat64Reference) {
  for (const auto& sh : kShapes) {
    const int64_t R = sh[0], C = sh[1];
    const auto x = random_normal(R * C, 19, 4.0f), dy = random_normal(R * C, 20);
    std::vector<float> y(R * C), dx(R * C);
    ops::softmax_forward(x.data(), R, C, y.data());
    ops::softmax_backward(y.data(), dy.data(), R, C, 0.5f, dx.data());
    std::vector<double> y_ref(R * C), dx_ref(R * C);
    for (int64_t r = 0; r < R; ++r) {
      double mx = -1e300, sum = 0, dot = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(x[r * C + c]));
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[r * C + c] - mx);
      for (int64_t c = 0; c < C; ++c) y_ref[r * C + c] = std::exp(x[r * C + c] - mx) / sum;
      for (int64_t c = 0; c < C; ++c) dot += y_ref[r * C + c] * dy[r * C + c];
      for (int64_t c = 0; c < C; ++c)
        dx_ref[r * C + c] = 0.5 * y_ref[r * C + c] * (dy[r * C + c] - dot);
    }
    EXPECT_LT(max_rel_error(y, y_ref), 1e-5) << R << "x" << C;
    EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5) << R << "x" << C;
  }
}

TEST(Softmax, MaskedVariantAddsKeyBiasPerBatch) {
  const int64_t B = 3, H = 2, Sq = 5, Sk = 7;
  const auto x = random_normal(B * H * Sq * Sk, 21, 2.0f);
  std::vector<float> bias(B * Sk, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = Sk - b; k < Sk; ++k) bias[b * Sk + k] = -10000.0f;  // b padded keys
  std::vector<float> y(x.size());
  ops::masked_softmax_forward(x.data(), bias.data(), B, H, Sq, Sk, y.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t row = 0; row < H * Sq; ++row) {
      const int64_t base = (b * H * Sq + row) * Sk;
      double sum = 0;
      for (int64_t k = 0; k < Sk; ++k) sum += std::exp(double(x[base + k]) + bias[b * Sk + k]);
      for (int64_t k = 0; k < Sk; ++k) {
        const double want = std::exp(double(x[base + k]) + bias[b * Sk + k]) / sum;
        ASSERT_NEAR(y[base + k], want, 1e-6);
        if (k >= Sk - b) {
          ASSERT_EQ(y[base + k], 0.0f);
        }
      }
    }
}

TEST(Rows, GatherAndDeterministicScatterAdd) {
  const int64_t num = 11, dim = 130, n = 40;
  const auto table = random_normal(num * dim, 22), dy = random_normal(n * dim, 23);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = int32_t((i * 7) % 5);  // many repeats
  ids[3] = 10;
  std::vector<float> out(n * dim);
  ops::gather_rows(table.data(), num, dim, ids.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) ASSERT_EQ(out[i * dim + c], table[ids[i] * dim + c]);
  std::vector<float> g(num * dim, 0.5f);
  std::vector<double> want(num * dim, 0.5);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) want[ids[i] * dim + c] += dy[i * dim + c];
  ops::scatter_add_rows(dy.data(), ids.data(), n, dim, g.data());
  EXPECT_LT(max_rel_error(g, want), 1e-6);
  ids[5] = int32_t(num);
  EXPECT_THROW(ops::gather_rows(table.data(), num, dim, ids.data(), n, out.data()), Error);
  ids[5] = -1;
  EXPECT_THROW(ops::gather_rows(table.data(), num, dim, ids.data(), n, out.data()), Error);
}

TEST(Rows, SplitAndMergeHeadsArePermutationsAndInverse) {
  const int64_t B = 2, S = 5, H = 3, d = 4;
  const auto x = random_normal(B * S * H * d, 24);
  std::vector<float> y(x.size()), z(x.size());
  ops::split_heads(x.data(), B, S, H, d, y.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < d; ++e)
          ASSERT_EQ(y[((b * H + h) * S + s) * d + e], x[((b * S + s) * H + h) * d + e]);
  ops::merge_heads(y.data(), B, S, H, d, z.data());
  EXPECT_EQ(z, x);
}

}  // namespace
}  // namespace kiln
