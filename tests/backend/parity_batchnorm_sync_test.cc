// SyncBN's steps (backend.h: batchnorm_channel_sums ... batchnorm_backward_from_sums) for two
// "ranks" in one process, each holding half of the batch, with their sums added as the
// communicator adds them: statistics, outputs and gradients match the float64 reference of the
// whole batch in every dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/backend/parity.h"

namespace kiln {
namespace {

using testing::Parity;

// a += b elementwise (what all_reduce_sum does for two ranks), on host copies of f64 tensors.
Tensor summed(Parity& p, const Tensor& a, const Tensor& b) {
  Tensor ha = Tensor::empty(a.shape, DType::f64), hb = Tensor::empty(b.shape, DType::f64);
  ops::copy(p.ctx, a, ha);
  ops::copy(p.ctx, b, hb);
  for (int64_t i = 0; i < ha.numel(); ++i) ha.ptr<double>()[i] += hb.ptr<double>()[i];
  Tensor out = Tensor::empty(a.shape, DType::f64, p.ctx.device);
  ops::copy(p.ctx, ha, out);
  return out;
}

TEST(ParityBatchNormSync, TwoHalvesWithSummedSumsMatchTheWholeBatchInFloat64) {
  Parity p;
  uint32_t id = 500;
  const float eps = 1e-5f;
  const int64_t shapes[][4] = {{1, 2, 3, 1}, {2, 3, 2, 5}, {3, 4, 5, 17}, {1, 5, 4, 8}};  // half, H, W, C
  for (int trial = 0; trial < 4; ++trial) {
    const auto [half, H, W, C] = shapes[trial];
    const bool relu = trial % 2 == 1;
    const int64_t rows = 2 * half * H * W, n = rows * C, half_n = n / 2;
    for (DType t : testing::float_dtypes()) {
      SCOPED_TRACE(::testing::Message() << "halves of " << half << "x" << H << "x" << W << "x" << C << " relu " << relu
                                        << " " << dtype_name(t));
      const std::vector<float> xv = testing::random_normal(size_t(n), id++, 2.0f);
      const std::vector<float> dyv = testing::random_normal(size_t(n), id++, 1.0f);
      const Shape hs{half, H, W, C};
      const Tensor xs[2] = {p.from_host({xv.begin(), xv.begin() + half_n}, hs, t),
                            p.from_host({xv.begin() + half_n, xv.end()}, hs, t)};
      const Tensor dys[2] = {p.from_host({dyv.begin(), dyv.begin() + half_n}, hs, t),
                             p.from_host({dyv.begin() + half_n, dyv.end()}, hs, t)};
      const Tensor gamma = p.random({C}, DType::f32, id++), beta = p.random({C}, DType::f32, id++);
      std::vector<double> xd = p.host(xs[0]), dyd = p.host(dys[0]);
      for (double v : p.host(xs[1])) xd.push_back(v);
      for (double v : p.host(dys[1])) dyd.push_back(v);
      const std::vector<double> gd = p.host(gamma), bd = p.host(beta);

      // Forward: sums of each half, added; deviations around the common mean, added.
      Tensor sums[2], squares[2];
      for (int r = 0; r < 2; ++r) {
        sums[r] = p.zeros({C}, DType::f64);
        ops::batchnorm_channel_sums(p.ctx, xs[r], sums[r]);
      }
      const Tensor sum = summed(p, sums[0], sums[1]);
      for (int r = 0; r < 2; ++r) {
        squares[r] = p.zeros({C}, DType::f64);
        ops::batchnorm_channel_deviations(p.ctx, xs[r], sum, rows, squares[r]);
      }
      const Tensor square = summed(p, squares[0], squares[1]);
      Tensor m = p.zeros({C}, DType::f32), v = p.zeros({C}, DType::f32);
      ops::batchnorm_stats_from_sums(p.ctx, sum, square, rows, m, v);
      std::vector<double> mean(size_t(C), 0.0), var(size_t(C), 0.0);
      for (int64_t i = 0; i < n; ++i) mean[size_t(i % C)] += xd[size_t(i)] / double(rows);
      for (int64_t i = 0; i < n; ++i) var[size_t(i % C)] += std::pow(xd[size_t(i)] - mean[size_t(i % C)], 2) / double(rows);
      p.expect_close(m, mean, "synced mean", 1e-5);
      p.expect_close(v, var, "synced var", 1e-5);

      Tensor ys[2];
      std::vector<double> yd;
      for (int r = 0; r < 2; ++r) {
        ys[r] = p.zeros(hs, t);
        ops::batchnorm_eval_forward(p.ctx, xs[r], gamma, beta, m, v, eps, relu, ys[r]);
        for (double y : p.host(ys[r])) yd.push_back(y);
      }
      // Backward reference over the whole batch.
      std::vector<double> xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n)), y_ref(static_cast<size_t>(n)), sg(size_t(C), 0.0), sgx(size_t(C), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const size_t c = size_t(i % C), k = size_t(i);
        xhat[k] = (xd[k] - mean[c]) / std::sqrt(var[c] + eps);
        const double pre = gd[c] * xhat[k] + bd[c];
        y_ref[k] = relu ? std::max(pre, 0.0) : pre;
        g[k] = relu && !(yd[k] > 0) ? 0.0 : dyd[k];
        sg[c] += g[k];
        sgx[c] += g[k] * xhat[k];
      }
      Tensor local[2];
      for (int r = 0; r < 2; ++r) {
        local[r] = p.zeros({2 * C}, DType::f64);
        ops::batchnorm_backward_sums(p.ctx, xs[r], ys[r], dys[r], m, relu, local[r]);
      }
      const Tensor global = summed(p, local[0], local[1]);
      Tensor dg = p.zeros({C}, DType::f32), db = p.zeros({C}, DType::f32);
      for (int r = 0; r < 2; ++r) {
        const std::vector<double> y_half(y_ref.begin() + r * half_n, y_ref.begin() + (r + 1) * half_n);
        p.expect_close(ys[r], y_half, "synced forward");
        Tensor dx = p.zeros(hs, t);
        ops::batchnorm_backward_from_sums(p.ctx, xs[r], ys[r], dys[r], gamma, m, v, eps, relu, local[r], global, rows,
                                          dx, dg, db);
        std::vector<double> dx_ref(static_cast<size_t>(half_n));
        for (int64_t j = 0; j < half_n; ++j) {
          const size_t k = size_t(r * half_n + j), c = size_t(j % C);
          dx_ref[size_t(j)] = gd[c] / std::sqrt(var[c] + eps) * (g[k] - sg[c] / rows - xhat[k] * sgx[c] / rows);
        }
        p.expect_close(dx, dx_ref, "synced backward dx", t == DType::f32 ? 2e-5 : 0);
      }
      p.expect_close(dg, sgx, "synced dgamma (both ranks' shares)", 1e-5);
      p.expect_close(db, sg, "synced dbeta (both ranks' shares)", 1e-5);
    }
  }
}

}  // namespace
}  // namespace kiln
