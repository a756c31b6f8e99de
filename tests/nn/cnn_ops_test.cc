// CNN ops (backend/cpu/{conv,batchnorm,pool,relu}.cc) against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "../backend/random_fill.h"
#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/conv.h"
#include "kiln/core/arena.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// An f32 view of a host vector with the given shape.
template <typename T>
Tensor view(const std::vector<T>& v, Shape shape) {
  return Tensor::view(const_cast<T*>(v.data()), std::move(shape),
                      std::is_same_v<T, int32_t> ? DType::i32 : DType::f32);
}
Context& ctx() { return cpu_context(); }

ops::ConvShape conv_shape(int64_t N, int64_t H, int64_t W, int64_t C, int64_t K, int64_t R,
                          int64_t S, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                          int64_t pad_w, int64_t dil, int64_t groups) {
  ops::ConvShape s;
  s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = R, s.S = S;
  s.stride_h = stride_h, s.stride_w = stride_w, s.pad_h = pad_h, s.pad_w = pad_w;
  s.dil_h = s.dil_w = dil;
  s.groups = groups;
  return s;
}

// Calls f(n, p, q, k, h, w, c, weight index) for every multiply-add of the convolution.
template <typename F>
void for_each_tap(const ops::ConvShape& s, F f) {
  const int64_t Cg = s.C / s.groups, Kg = s.K / s.groups;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t p = 0; p < s.P(); ++p)
      for (int64_t q = 0; q < s.Q(); ++q)
        for (int64_t k = 0; k < s.K; ++k)
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t h = p * s.stride_h - s.pad_h + r * s.dil_h;
                const int64_t w = q * s.stride_w - s.pad_w + t * s.dil_w;
                if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
                const int64_t c = (k / Kg) * Cg + ci;
                f(((n * s.P() + p) * s.Q() + q) * s.K + k, ((n * s.H + h) * s.W + w) * s.C + c,
                  ((k * Cg + ci) * s.R + r) * s.S + t);
              }
}

TEST(CnnOps, ConvolutionMatchesFloat64ReferenceForwardAndBackward) {
  const std::vector<ops::ConvShape> shapes = {
      conv_shape(2, 7, 6, 4, 6, 3, 3, 1, 1, 1, 1, 1, 1),    // 3x3 same
      conv_shape(2, 8, 8, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1),    // stride 2, even input
      conv_shape(3, 8, 6, 6, 8, 1, 1, 2, 2, 0, 0, 1, 1),    // 1x1 stride 2 (right pad -1)
      conv_shape(2, 9, 9, 4, 6, 3, 3, 1, 1, 2, 2, 2, 1),    // dilation 2
      conv_shape(2, 6, 7, 4, 6, 3, 3, 1, 1, 1, 1, 1, 2),    // groups 2
      conv_shape(2, 6, 6, 8, 8, 3, 3, 2, 2, 1, 1, 1, 8),    // depthwise, stride 2
      conv_shape(2, 7, 5, 3, 4, 3, 1, 2, 1, 1, 0, 1, 1),    // rectangular kernel and stride
      conv_shape(2, 16, 16, 3, 8, 7, 7, 2, 2, 3, 3, 1, 1),  // ResNet stem
  };
  uint32_t id = 100;
  for (const auto& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "shape " << s.N << "x" << s.H << "x" << s.W << "x" << s.C
                                    << " K" << s.K << " " << s.R << "x" << s.S << " stride "
                                    << s.stride_h << " pad " << s.pad_h << " dil " << s.dil_h
                                    << " groups " << s.groups);
    const int64_t nx = s.N * s.H * s.W * s.C, ny = s.N * s.P() * s.Q() * s.K;
    const int64_t nw = s.K * (s.C / s.groups) * s.R * s.S;
    const auto x = random_normal(nx, id++), w = random_normal(nw, id++);
    const auto dy = random_normal(ny, id++);
    std::vector<double> y_ref(size_t(ny), 0.0), dx_ref(size_t(nx), 0.0), dw_ref(size_t(nw), 0.0);
    for_each_tap(s, [&](int64_t yi, int64_t xi, int64_t wi) {
      y_ref[yi] += double(x[xi]) * w[wi];
      dx_ref[xi] += double(dy[yi]) * w[wi];
      dw_ref[wi] += double(dy[yi]) * x[xi];
    });

    const Shape xs{s.N, s.H, s.W, s.C}, ws{s.K, s.C / s.groups, s.R, s.S},
        ys{s.N, s.P(), s.Q(), s.K};
    std::vector<float> y(static_cast<size_t>(ny)), dx(static_cast<size_t>(nx));
    Tensor yt = view(y, ys), dxt = view(dx, xs);
    ops::conv2d_forward(ctx(), s, view(x, xs), view(w, ws), yt);
    EXPECT_LT(max_rel_error(y, y_ref), 1e-5);
    ops::conv2d_backward_data(ctx(), s, view(dy, ys), view(w, ws), dxt);
    EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5);
    // Weight gradients accumulate: start from 1 and subtract it again.
    std::vector<float> dw(size_t(nw), 1.0f);
    Tensor dwt = view(dw, ws);
    ops::conv2d_backward_weights(ctx(), s, view(x, xs), view(dy, ys), dwt);
    for (float& v : dw) v -= 1.0f;
    EXPECT_LT(max_rel_error(dw, dw_ref), 1e-5);
    // A second call on the cached primitives gives the same result.
    std::vector<float> y2(static_cast<size_t>(ny));
    Tensor y2t = view(y2, ys);
    ops::conv2d_forward(ctx(), s, view(x, xs), view(w, ws), y2t);
    EXPECT_EQ(y, y2);
  }
}

// ops::conv2d_scratch_bytes (a dry run's estimate) is the arena's high-water mark over the three
// passes: window products gathered or not, written over or accumulated, a chunk of one image,
// oneDNN's own weight gradient (no scratch), in f32 and in bf16 (oneDNN's kernels, or the f32
// fallback on converted copies on a CPU without them).
TEST(CnnOps, ConvolutionScratchEstimateIsWhatThePassesTake) {
  const std::vector<ops::ConvShape> shapes = {
      conv_shape(3, 9, 9, 64, 32, 3, 3, 2, 2, 1, 1, 1, 1),   // 3x3 stride 2: gathered windows
      conv_shape(2, 6, 6, 16, 8, 1, 1, 1, 1, 0, 0, 1, 1),    // 1x1: the activations are the windows
      conv_shape(2, 8, 8, 16, 24, 1, 1, 2, 2, 0, 0, 1, 1),   // 1x1 stride 2: gathered
      conv_shape(2, 7, 7, 64, 16, 3, 3, 1, 1, 1, 1, 1, 1),   // 3x3 over 49 pixels: bf16 windows only
      conv_shape(2, 14, 14, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1), // oneDNN's weight gradient
  };
  for (const DType dtype : {DType::f32, DType::bf16})
    for (const auto& s : shapes)
      for (const bool accumulate : {false, true})
        for (const int64_t window_bytes : {int64_t(0), int64_t(1)}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << s.H << "x" << s.W << "x" << s.C << " K"
                                          << s.K << " " << s.R << "x" << s.S << " stride " << s.stride_h
                                          << (accumulate ? " accumulating" : "") << " window bytes " << window_bytes);
          ops::cpu::set_window_scratch_bytes(window_bytes);
          Arena arena;
          Context c;
          c.scratch = &arena;
          Tensor x = Tensor::empty({s.N, s.H, s.W, s.C}, dtype), w = Tensor::empty({s.K, s.C, s.R, s.S}, dtype),
                 y = Tensor::empty({s.N, s.P(), s.Q(), s.K}, dtype), dw = Tensor::empty({s.K, s.C, s.R, s.S});
          for (Tensor* t : {&x, &w, &y, &dw}) ops::fill(c, *t, 0.5f);
          const ops::ConvScratch want = ops::conv2d_scratch_bytes(s, dtype, accumulate);
          ops::conv2d_forward(c, s, x, w, y);
          EXPECT_EQ(int64_t(arena.high_water()), want.forward);
          ops::conv2d_backward_data(c, s, y, w, x);
          EXPECT_EQ(int64_t(arena.high_water()), std::max(want.forward, want.backward_data));
          ops::conv2d_backward_weights(c, s, x, y, dw, accumulate);
          EXPECT_EQ(int64_t(arena.high_water()), want.most());
        }
  ops::cpu::set_window_scratch_bytes(0);
  EXPECT_GT(ops::conv2d_scratch_bytes(shapes[0], DType::f32, false).backward_weights, 0);
}

struct BnCase {
  int64_t rows, C;
  bool relu;
};

TEST(CnnOps, BatchNormMatchesFloat64ReferenceInTrainAndEval) {
  const float eps = 1e-5f;
  uint32_t id = 200;
  for (const BnCase bc : {BnCase{37, 5, false}, BnCase{64, 16, true}, BnCase{20000, 3, false}}) {
    const int64_t n = bc.rows * bc.C;
    const size_t un = static_cast<size_t>(n), uc = static_cast<size_t>(bc.C);
    auto x = random_normal(n, id++, 2.0f);
    for (auto& v : x) v += 3.0f;  // an offset makes a one-pass variance lose digits
    const auto gamma = random_normal(bc.C, id++), beta = random_normal(bc.C, id++);
    const auto dy = random_normal(n, id++);
    std::vector<double> mean(uc, 0.0), var(uc, 0.0);
    for (int64_t r = 0; r < bc.rows; ++r)
      for (int64_t c = 0; c < bc.C; ++c) mean[c] += x[r * bc.C + c] / double(bc.rows);
    for (int64_t r = 0; r < bc.rows; ++r)
      for (int64_t c = 0; c < bc.C; ++c)
        var[c] += std::pow(x[r * bc.C + c] - mean[c], 2) / double(bc.rows);

    for (bool training : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "rows " << bc.rows << " C " << bc.C << " relu "
                                      << bc.relu << " training " << training);
      // Eval uses other statistics than the batch's, so the two modes really differ.
      std::vector<float> m(uc), v(uc);
      for (int64_t c = 0; c < bc.C; ++c) {
        m[c] = float(training ? mean[c] : mean[c] + 0.3);
        v[c] = float(training ? var[c] : var[c] * 1.7);
      }
      std::vector<float> y(un), got_m(uc), got_v(uc);
      const Shape xs{bc.rows, bc.C}, cs{bc.C};
      Tensor yt = view(y, xs), got_mt = view(got_m, cs), got_vt = view(got_v, cs);
      if (training) {
        ops::batchnorm_train_forward(ctx(), view(x, xs), view(gamma, cs), view(beta, cs), eps,
                                     bc.relu, yt, got_mt, got_vt);
        EXPECT_LT(max_rel_error(got_m, mean), 1e-6);
        EXPECT_LT(max_rel_error(got_v, var), 1e-6);
      } else {
        ops::batchnorm_eval_forward(ctx(), view(x, xs), view(gamma, cs), view(beta, cs),
                                    view(m, cs), view(v, cs), eps, bc.relu, yt);
      }
      // Reference forward and backward in double (statistics as double too).
      std::vector<double> mu(uc), sig(uc);
      for (int64_t c = 0; c < bc.C; ++c) {
        mu[c] = training ? mean[c] : double(m[c]);
        sig[c] = training ? var[c] : double(v[c]);
      }
      std::vector<double> y_ref(un), g(un), xhat(un);
      std::vector<double> sg(uc, 0.0), sgx(uc, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = i % bc.C;
        xhat[i] = (x[i] - mu[c]) / std::sqrt(sig[c] + eps);
        const double pre = gamma[c] * xhat[i] + beta[c];
        y_ref[i] = bc.relu ? std::max(pre, 0.0) : pre;
        g[i] = bc.relu && pre <= 0 ? 0.0 : dy[i];
        sg[c] += g[i];
        sgx[c] += g[i] * xhat[i];
      }
      EXPECT_LT(max_rel_error(y, y_ref), 2e-6);
      std::vector<double> dx_ref(un);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = i % bc.C;
        const double k = gamma[c] / std::sqrt(sig[c] + eps);
        dx_ref[i] = training ? k * (g[i] - sg[c] / bc.rows - xhat[i] * sgx[c] / bc.rows)
                             : k * g[i];
      }
      std::vector<float> dx(un), dgamma(uc, 0.5f), dbeta(uc, 0.5f);
      const std::vector<float>& stat_m = training ? got_m : m;
      const std::vector<float>& stat_v = training ? got_v : v;
      Tensor dxt = view(dx, xs), dgt = view(dgamma, cs), dbt = view(dbeta, cs);
      ops::batchnorm_backward(ctx(), view(x, xs), yt, view(dy, xs), view(gamma, cs),
                              view(stat_m, cs), view(stat_v, cs), eps, bc.relu, training, dxt,
                              dgt, dbt);
      EXPECT_LT(max_rel_error(dx, dx_ref), 1e-5);
      for (int64_t c = 0; c < bc.C; ++c) {  // accumulated onto 0.5
        EXPECT_NEAR(dgamma[c] - 0.5, sgx[c], 1e-5 * (1 + std::abs(sgx[c])));
        EXPECT_NEAR(dbeta[c] - 0.5, sg[c], 1e-5 * (1 + std::abs(sg[c])));
      }
    }
  }
}

TEST(CnnOps, MaxPoolMatchesReferenceAndRoutesGradients) {
  for (const auto& [H, W, k, stride, pad] :
       std::vector<std::array<int64_t, 5>>{{9, 8, 3, 2, 1}, {6, 6, 2, 2, 0}, {5, 7, 3, 1, 1}}) {
    ops::PoolShape s{2, H, W, 3, k, k, stride, stride, pad, pad};
    const int64_t nx = s.N * H * W * s.C, ny = s.N * s.P() * s.Q() * s.C;
    const auto x = random_normal(nx, 300), dy = random_normal(ny, 301);
    std::vector<float> y(static_cast<size_t>(ny)), dx(static_cast<size_t>(nx));
    std::vector<int32_t> argmax(static_cast<size_t>(ny));
    const Shape xs{s.N, H, W, s.C}, ys{s.N, s.P(), s.Q(), s.C};
    Tensor yt = view(y, ys), at = view(argmax, ys), dxt = view(dx, xs);
    ops::maxpool_forward(ctx(), s, view(x, xs), yt, at);
    std::vector<double> dx_ref(size_t(nx), 0.0);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t p = 0; p < s.P(); ++p)
        for (int64_t q = 0; q < s.Q(); ++q)
          for (int64_t c = 0; c < s.C; ++c) {
            double best = -1e300;
            int64_t at = -1;
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) {
                const int64_t h = p * stride - pad + i, w = q * stride - pad + j;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const int64_t xi = ((n * H + h) * W + w) * s.C + c;
                if (x[xi] > best) best = x[xi], at = xi;
              }
            const int64_t yi = ((n * s.P() + p) * s.Q() + q) * s.C + c;
            EXPECT_EQ(y[yi], float(best));
            dx_ref[at] += dy[yi];
          }
    ops::maxpool_backward(ctx(), s, view(dy, ys), at, dxt);
    EXPECT_LT(max_rel_error(dx, dx_ref), 1e-6);
  }
}

TEST(CnnOps, GlobalAvgPoolReluAndResidualJoinMatchReference) {
  const int64_t N = 3, HW = 10, C = 7;
  const auto x = random_normal(N * HW * C, 400), dy = random_normal(N * C, 401);
  std::vector<float> y(static_cast<size_t>(N * C)), dx(static_cast<size_t>(N * HW * C));
  Tensor yt = view(y, {N, C}), dxt = view(dx, {N, 2, HW / 2, C});
  ops::global_avgpool_forward(ctx(), view(x, {N, 2, HW / 2, C}), yt);
  ops::global_avgpool_backward(ctx(), view(dy, {N, C}), dxt);
  std::vector<double> y_ref(size_t(N * C), 0.0), dx_ref(static_cast<size_t>(N * HW * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i)
      for (int64_t c = 0; c < C; ++c) {
        y_ref[n * C + c] += x[(n * HW + i) * C + c] / double(HW);
        dx_ref[(n * HW + i) * C + c] = dy[n * C + c] / double(HW);
      }
  EXPECT_LT(max_rel_error(y, y_ref), 1e-6);
  EXPECT_LT(max_rel_error(dx, dx_ref), 1e-6);

  const auto a = random_normal(50, 402), g = random_normal(50, 404);
  std::vector<float> r(50), d(50);
  Tensor rt = view(r, {50}), dt = view(d, {50});
  ops::relu_forward(ctx(), view(a, {50}), rt);
  ops::relu_backward(ctx(), rt, view(g, {50}), dt);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(r[i], std::max(a[i], 0.0f));
    EXPECT_EQ(d[i], a[i] > 0 ? g[i] : 0.0f);
  }
}

}  // namespace
}  // namespace kiln
