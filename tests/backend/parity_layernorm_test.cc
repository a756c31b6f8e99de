// Parity of LayerNorm forward / backward for f32 / bf16 / f16 activations (f32 statistics and
// parameter gradients), including the backward that accumulates into a residual gradient.
#include <cmath>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

struct LnRef {
  std::vector<double> y, dx, dw, db, mean, rstd;
};

LnRef layernorm_reference(const std::vector<double>& x, const std::vector<double>& w,
                          const std::vector<double>& b, const std::vector<double>& dy, int64_t N,
                          int64_t C, double eps) {
  LnRef r;
  r.y.assign(size_t(N * C), 0);
  r.dx.assign(size_t(N * C), 0);
  r.dw.assign(size_t(C), 0);
  r.db.assign(size_t(C), 0);
  for (int64_t i = 0; i < N; ++i) {
    const double* xr = x.data() + i * C;
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += xr[c];
    m /= double(C);
    for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    const double s = 1 / std::sqrt(v / double(C) + eps);
    r.mean.push_back(m);
    r.rstd.push_back(s);
    double mg = 0, mgx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (xr[c] - m) * s, g = dy[size_t(i * C + c)] * w[size_t(c)];
      r.y[size_t(i * C + c)] = xh * w[size_t(c)] + b[size_t(c)];
      mg += g / double(C);
      mgx += g * xh / double(C);
      r.dw[size_t(c)] += dy[size_t(i * C + c)] * xh;
      r.db[size_t(c)] += dy[size_t(i * C + c)];
    }
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (xr[c] - m) * s;
      r.dx[size_t(i * C + c)] = s * (dy[size_t(i * C + c)] * w[size_t(c)] - mg - xh * mgx);
    }
  }
  return r;
}

TEST(ParityLayerNorm, ForwardBackwardAndResidualAccumulationInEveryDtype) {
  Parity p;
  const int64_t shapes[][2] = {{2, 3}, {3, 7}, {17, 65}, {130, 257}, {64, 768}};
  for (DType dt : testing::float_dtypes())
    for (DType wdt : {DType::f32, dt})
      for (const auto& s : shapes) {
        const int64_t N = s[0], C = s[1];
        std::vector<float> xs = testing::random_normal(N * C, 1, 2.0f);
        for (auto& v : xs) v += 3.0f;  // a mean offset tests the variance computation
        const Tensor x = p.from_host(xs, {N, C}, dt), dy = p.random({N, C}, dt, 2);
        const Tensor w = p.random({C}, wdt, 3), b = p.random({C}, wdt, 4);
        Tensor y = p.zeros({N, C}, dt), mean = p.zeros({N}, DType::f32);
        Tensor rstd = p.zeros({N}, DType::f32);
        ops::layernorm_forward(p.ctx, x, w, b, 1e-5f, y, mean, rstd);
        const LnRef r = layernorm_reference(p.host(x), p.host(w), p.host(b), p.host(dy), N, C, 1e-5);
        const std::string what = fmt::format("{} (weights {}) {}x{}", dtype_name(dt), dtype_name(wdt), N, C);
        p.expect_close(y, r.y, "layernorm_forward y " + what);
        p.expect_close(mean, r.mean, "layernorm_forward mean " + what, 1e-5);
        p.expect_close(rstd, r.rstd, "layernorm_forward rstd " + what, 1e-4);

        Tensor dx = p.zeros({N, C}, dt), dw = p.random({C}, DType::f32, 5);
        Tensor db = p.random({C}, DType::f32, 6);
        std::vector<double> dw_want = p.host(dw), db_want = p.host(db);
        for (int64_t c = 0; c < C; ++c) {
          dw_want[size_t(c)] += r.dw[size_t(c)];
          db_want[size_t(c)] += r.db[size_t(c)];
        }
        ops::layernorm_backward(p.ctx, dy, x, w, mean, rstd, dx, dw, db);
        p.expect_close(dx, r.dx, "layernorm_backward dx " + what);
        // bf16/f16 dy and x bound how exactly the f32 sums can match.
        const double ptol = dt == DType::f32 ? 2e-5 : 1e-3;
        p.expect_close(dw, dw_want, "layernorm_backward dw " + what, ptol);
        p.expect_close(db, db_want, "layernorm_backward db " + what, ptol);

        // accumulate_dx: dx = residual + LN'(dy).
        Tensor acc = p.random({N, C}, dt, 7);
        std::vector<double> acc_want = p.host(acc);
        for (size_t i = 0; i < acc_want.size(); ++i) acc_want[i] += r.dx[i];
        ops::layernorm_backward(p.ctx, dy, x, w, mean, rstd, acc, dw, db, true);
        p.expect_close(acc, acc_want, "layernorm_backward accumulate " + what);
      }
}

TEST(ParityLayerNorm, TheFusedJoinIsAddThenLayerNormBitForBit) {
  Parity p;
  const int64_t shapes[][2] = {{3, 7}, {130, 257}, {64, 768}};
  for (DType dt : testing::float_dtypes())
    for (DType wdt : {DType::f32, dt})
      for (const auto& s : shapes) {
        const int64_t N = s[0], C = s[1];
        const std::string what = fmt::format("{} (weights {}) {}x{}", dtype_name(dt), dtype_name(wdt), N, C);
        const Tensor a = p.random({N, C}, dt, 20), b = p.random({N, C}, dt, 21);
        const Tensor w = p.random({C}, wdt, 22), bias = p.random({C}, wdt, 23);
        // Apart: the join, then LayerNorm.
        Tensor sum = p.zeros({N, C}, dt), y = p.zeros({N, C}, dt);
        Tensor mean = p.zeros({N}, DType::f32), rstd = p.zeros({N}, DType::f32);
        ops::add(p.ctx, a, b, sum);
        ops::layernorm_forward(p.ctx, sum, w, bias, 1e-5f, y, mean, rstd);
        // Fused, into fresh outputs and with the sum written over a.
        Tensor fsum = p.zeros({N, C}, dt), fy = p.zeros({N, C}, dt);
        Tensor fmean = p.zeros({N}, DType::f32), frstd = p.zeros({N}, DType::f32);
        ops::add_layernorm_forward(p.ctx, a, b, w, bias, 1e-5f, fsum, fy, fmean, frstd);
        EXPECT_EQ(p.host(fsum), p.host(sum)) << what;
        EXPECT_EQ(p.host(fy), p.host(y)) << what;
        EXPECT_EQ(p.host(fmean), p.host(mean)) << what;
        EXPECT_EQ(p.host(frstd), p.host(rstd)) << what;
        Tensor in_place = p.random({N, C}, dt, 20);  // a again
        ops::add_layernorm_forward(p.ctx, in_place, b, w, bias, 1e-5f, in_place, fy, fmean, frstd);
        EXPECT_EQ(p.host(in_place), p.host(sum)) << what;
        EXPECT_EQ(p.host(fy), p.host(y)) << what;
        // And against float64: the join of the rounded inputs, LayerNorm of the rounded join.
        std::vector<double> join = p.host(a);
        const std::vector<double> bd = p.host(b);
        for (size_t i = 0; i < join.size(); ++i) join[i] += bd[i];
        p.expect_close(fsum, join, "add_layernorm_forward sum " + what);
        const LnRef r = layernorm_reference(p.host(sum), p.host(w), p.host(bias), join, N, C, 1e-5);
        p.expect_close(fy, r.y, "add_layernorm_forward y " + what);
      }
  Tensor x = p.random({4, 8}, DType::f32, 24), other = p.random({4, 8}, DType::bf16, 25);
  Tensor w = p.random({8}, DType::f32, 26), y = p.zeros({4, 8}, DType::f32);
  Tensor mean = p.zeros({4}, DType::f32), rstd = p.zeros({4}, DType::f32);
  EXPECT_THROW(ops::add_layernorm_forward(p.ctx, x, other, w, w, 1e-5f, x, y, mean, rstd), Error);
}

TEST(ParityLayerNorm, BackwardIsBitwiseRepeatableAndRejectsF16Statistics) {
  Parity p;
  const int64_t N = 300, C = 512;
  const Tensor x = p.random({N, C}, DType::bf16, 8), dy = p.random({N, C}, DType::bf16, 9);
  const Tensor w = p.random({C}, DType::f32, 10), b = p.random({C}, DType::f32, 11);
  Tensor y = p.zeros({N, C}, DType::bf16), mean = p.zeros({N}, DType::f32);
  Tensor rstd = p.zeros({N}, DType::f32);
  ops::layernorm_forward(p.ctx, x, w, b, 1e-12f, y, mean, rstd);
  std::vector<double> runs[2];
  for (auto& run : runs) {
    Tensor dx = p.zeros({N, C}, DType::bf16), dw = p.zeros({C}, DType::f32);
    Tensor db = p.zeros({C}, DType::f32);
    ops::layernorm_backward(p.ctx, dy, x, w, mean, rstd, dx, dw, db);
    run = p.host(dx);
    for (double v : p.host(dw)) run.push_back(v);
  }
  EXPECT_EQ(runs[0], runs[1]);
  Tensor mean16 = p.zeros({N}, DType::f16);
  EXPECT_THROW(ops::layernorm_forward(p.ctx, x, w, b, 1e-12f, y, mean16, rstd), Error);
}

}  // namespace
}  // namespace kiln
