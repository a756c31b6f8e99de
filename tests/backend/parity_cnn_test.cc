// Parity of the CNN ops (convolution, batch norm, pooling, ReLU, residual join) for every float
// dtype, on random shapes, against float64 references computed from the rounded inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

#include <oneapi/dnnl/dnnl.hpp>

#include "parity.h"

#include "kiln/backend/cpu/conv.h"
#include "kiln/core/error.h"

namespace kiln {
namespace {

using testing::Parity;

std::vector<float> to_vector(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Reproducible shape draws: [lo, hi].
struct Draw {
  std::mt19937 gen;
  explicit Draw(uint32_t seed) : gen(seed) {}
  int64_t operator()(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
};

// Calls f(y index, x index, weight index) for every multiply-add of the convolution.
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

ops::ConvShape random_conv(Draw& d) {
  ops::ConvShape s;
  s.groups = d(0, 3) == 0 ? 2 : 1;
  s.N = d(1, 3);
  s.C = s.groups * d(1, 8);
  s.K = s.groups * d(1, 8);
  s.R = d(1, 3) * 2 - 1;  // 1, 3, 5
  s.S = d(0, 1) ? s.R : d(1, 3);
  s.stride_h = d(1, 2);
  s.stride_w = d(1, 2);
  s.pad_h = d(0, s.R / 2);
  s.pad_w = d(0, s.S / 2);
  s.dil_h = s.dil_w = d(0, 4) == 0 ? 2 : 1;
  s.H = d(s.dil_h * (s.R - 1) + 1, 11);
  s.W = d(s.dil_w * (s.S - 1) + 1, 11);
  return s;
}

// 1x1, no padding: the CPU backend takes the weight gradient as a product over the pixels read,
// gathered first where the stride is not 1 (here rows 0, 2, 4, 6 of 7 and columns 0, 3 of 5).
ops::ConvShape pixel_product_conv(int64_t stride_h, int64_t stride_w) {
  ops::ConvShape s;
  s.N = 2, s.H = 7, s.W = 5, s.C = 6, s.K = 4;
  s.stride_h = stride_h, s.stride_w = stride_w;
  return s;
}

// 64 channels under a larger kernel that is strided (here 3x2 at stride 2x3, padding 1x1), or
// stride 1 onto at most 7x7 outputs in bf16 / f16 (here 3x3 onto 5x5): the CPU backend takes the
// weight gradient as a product over the windows the output pixels read.
ops::ConvShape window_product_conv(bool strided) {
  ops::ConvShape s;
  s.N = 2, s.H = strided ? 9 : 5, s.W = strided ? 8 : 5, s.C = 64, s.K = 8;
  s.R = 3, s.S = strided ? 2 : 3, s.pad_h = s.pad_w = 1;
  s.stride_h = strided ? 2 : 1, s.stride_w = strided ? 3 : 1;
  return s;
}

ops::ConvShape parity_conv(int trial, Draw& draw) {
  switch (trial) {
    case 8: return pixel_product_conv(1, 1);
    case 9: return pixel_product_conv(2, 3);
    case 10: return window_product_conv(true);
    case 11: return window_product_conv(false);
    default: return random_conv(draw);
  }
}

// The weight gradient's tolerance: f32 sums, except that CUDA may round a bf16 one once to bf16
// before widening it (backend/ops.def, conv2d_backward_weights).
double wgrad_tolerance(DType operands, double f32_tolerance) {
  return operands == DType::bf16 ? 1.0 / 256 : f32_tolerance;
}

TEST(ParityCnn, ConvolutionForwardAndBackwardMatchFloat64InEveryDtype) {
  Parity p;
  Draw draw(7);
  uint32_t id = 10;
  for (int trial = 0; trial < 12; ++trial) {
    const ops::ConvShape s = parity_conv(trial, draw);
    ops::cpu::set_window_scratch_bytes(trial == 10 ? 1 : 0);  // trial 10 gathers one image at a time
    const Shape xs{s.N, s.H, s.W, s.C}, ws{s.K, s.C / s.groups, s.R, s.S},
        ys{s.N, s.P(), s.Q(), s.K};
    for (DType t : testing::float_dtypes()) {
      SCOPED_TRACE(::testing::Message() << "x " << shape_str(xs) << " w " << shape_str(ws)
                                      << " stride " << s.stride_h << "x" << s.stride_w << " pad "
                                      << s.pad_h << "x" << s.pad_w << " dil " << s.dil_h
                                      << " groups " << s.groups << " " << dtype_name(t));
      const Tensor x = p.random(xs, t, id++), w = p.random(ws, t, id++),
                   dy = p.random(ys, t, id++);
      const std::vector<double> xd = p.host(x), wd = p.host(w), dyd = p.host(dy);
      std::vector<double> y_ref(xd.size() ? size_t(shape_numel(ys)) : 0, 0.0),
          dx_ref(xd.size(), 0.0), dw_ref(wd.size(), 0.0);
      for_each_tap(s, [&](int64_t yi, int64_t xi, int64_t wi) {
        y_ref[yi] += xd[xi] * wd[wi];
        dx_ref[xi] += dyd[yi] * wd[wi];
        dw_ref[wi] += dyd[yi] * xd[xi];
      });
      Tensor y = p.zeros(ys, t), dx = p.zeros(xs, t);
      ops::conv2d_forward(p.ctx, s, x, w, y);
      p.expect_close(y, y_ref, "conv2d_forward");
      ops::conv2d_backward_data(p.ctx, s, dy, w, dx);
      p.expect_close(dx, dx_ref, "conv2d_backward_data");
      // The f32 weight gradient is written over what is there (NaN here: never read), or
      // accumulates onto it (0.25).
      Tensor dw = p.zeros(ws, DType::f32);
      ops::fill(p.ctx, dw, std::numeric_limits<float>::quiet_NaN());
      ops::conv2d_backward_weights(p.ctx, s, x, dy, dw, false);
      p.expect_close(dw, dw_ref, "conv2d_backward_weights (written)", wgrad_tolerance(t, 1e-4));
      ops::fill(p.ctx, dw, 0.25f);
      ops::conv2d_backward_weights(p.ctx, s, x, dy, dw);
      for (double& v : dw_ref) v += 0.25;
      p.expect_close(dw, dw_ref, "conv2d_backward_weights", wgrad_tolerance(t, 1e-4));
    }
  }
  ops::cpu::set_window_scratch_bytes(0);
}

// Runs a bf16 and an f16 convolution (forward, both backwards) and exits 0 when they match the
// f32 results within bf16 / f16 tolerance, 1 otherwise.
[[noreturn]] void low_precision_convolutions_match_f32() {
  Parity p;
  ops::ConvShape s;
  s.N = 2, s.H = s.W = 9, s.C = 16, s.K = 32, s.R = s.S = 3, s.pad_h = s.pad_w = 1;
  s.stride_h = s.stride_w = 2;
  const Shape xs{s.N, s.H, s.W, s.C}, ws{s.K, s.C, s.R, s.S}, ys{s.N, s.P(), s.Q(), s.K};
  bool ok = true;
  for (DType t : {DType::bf16, DType::f16}) {
    const Tensor x = p.random(xs, t, 1), w = p.random(ws, t, 2), dy = p.random(ys, t, 3);
    Tensor y = p.zeros(ys, t), dx = p.zeros(xs, t), dw = p.zeros(ws, DType::f32);
    ops::conv2d_forward(p.ctx, s, x, w, y);
    ops::conv2d_backward_data(p.ctx, s, dy, w, dx);
    ops::conv2d_backward_weights(p.ctx, s, x, dy, dw);
    // The same convolutions in f32 on the same (rounded) values.
    auto f32 = [&](const Tensor& a) { return p.from_host(to_vector(p.host(a)), a.shape, DType::f32); };
    Tensor yf = p.zeros(ys, DType::f32), dxf = p.zeros(xs, DType::f32), dwf = p.zeros(ws, DType::f32);
    ops::conv2d_forward(p.ctx, s, f32(x), f32(w), yf);
    ops::conv2d_backward_data(p.ctx, s, f32(dy), f32(w), dxf);
    ops::conv2d_backward_weights(p.ctx, s, f32(x), f32(dy), dwf);
    const double tol = testing::parity_tolerance(t);
    ok = ok && testing::max_rel_error(p.host(y), p.host(yf)) < tol &&
         testing::max_rel_error(p.host(dx), p.host(dxf)) < tol &&
         testing::max_rel_error(p.host(dw), p.host(dwf)) < wgrad_tolerance(t, 1e-5);
  }
  std::fprintf(stderr, "native bf16 %d f16 %d\n", int(ops::conv2d_native(DType::bf16)),
               int(ops::conv2d_native(DType::f16)));
  std::exit(ok ? 0 : 1);
}

TEST(ParityCnn, ConvolutionFallsBackToF32WhereTheCpuLacksBf16) {
  // A fresh process whose oneDNN may use AVX2 at most (an AMD EPYC Zen 3, say): creating a bf16
  // or f16 convolution primitive fails there, and the op must say so once and still compute.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) != dnnl::status::success) std::exit(3);
        low_precision_convolutions_match_f32();
      },
      ::testing::ExitedWithCode(0),
      "no bf16 convolution on this CPU.*compute in f32 on converted copies\n"
      "(.|\n)*no f16 convolution(.|\n)*native bf16 0 f16 0");
}

TEST(ParityCnn, ConvolutionChecksShapesAndDtypes) {
  Parity p;
  ops::ConvShape s;
  s.N = 1, s.H = s.W = 5, s.C = 2, s.K = 3, s.R = s.S = 3;
  Tensor x = p.random({1, 5, 5, 2}, DType::f32, 1), w = p.random({3, 2, 3, 3}, DType::bf16, 2);
  Tensor y = p.zeros({1, 3, 3, 3}, DType::f32), bad = p.zeros({1, 4, 3, 3}, DType::f32);
  EXPECT_THROW(ops::conv2d_forward(p.ctx, s, x, w, y), Error);  // mixed dtypes
  Tensor wf = p.random({3, 2, 3, 3}, DType::f32, 3);
  EXPECT_THROW(ops::conv2d_forward(p.ctx, s, x, wf, bad), Error);  // wrong output shape
  Tensor dw_bf16 = p.zeros({3, 2, 3, 3}, DType::bf16);
  EXPECT_THROW(ops::conv2d_backward_weights(p.ctx, s, x, y, dw_bf16), Error);  // dw must be f32
}

TEST(ParityCnn, BatchNormTrainEvalAndBackwardMatchFloat64InEveryDtype) {
  Parity p;
  Draw draw(11);
  uint32_t id = 100;
  const float eps = 1e-5f;
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t N = draw(1, 4), H = draw(3, 6), W = draw(3, 6), C = draw(1, 19);
    const bool relu = trial % 2 == 1;
    const int64_t rows = N * H * W, n = rows * C;
    const Shape xs{N, H, W, C};
    for (DType t : testing::float_dtypes()) {
      for (bool training : {true, false}) {
        SCOPED_TRACE(::testing::Message() << shape_str(xs) << " relu " << relu << " training "
                                        << training << " " << dtype_name(t));
        const Tensor x = p.random(xs, t, id++, 2.0f), dy = p.random(xs, t, id++);
        const Tensor gamma = p.random({C}, DType::f32, id++), beta = p.random({C}, DType::f32, id++);
        const std::vector<double> xd = p.host(x), dyd = p.host(dy), gd = p.host(gamma),
                                  bd = p.host(beta);
        std::vector<double> mean(static_cast<size_t>(C), 0.0), var(static_cast<size_t>(C), 0.0);
        for (int64_t i = 0; i < n; ++i) mean[i % C] += xd[i] / double(rows);
        for (int64_t i = 0; i < n; ++i) var[i % C] += std::pow(xd[i] - mean[i % C], 2) / double(rows);
        Tensor m = p.zeros({C}, DType::f32), v = p.zeros({C}, DType::f32);
        Tensor y = p.zeros(xs, t);
        if (training) {
          ops::batchnorm_train_forward(p.ctx, x, gamma, beta, eps, relu, y, m, v);
          p.expect_close(m, mean, "batchnorm mean", 1e-5);
          p.expect_close(v, var, "batchnorm var", 1e-5);
        } else {  // other statistics than the batch's, so the two modes really differ
          std::vector<float> mf(static_cast<size_t>(C)), vf(static_cast<size_t>(C));
          for (int64_t c = 0; c < C; ++c) mf[c] = float(mean[c] + 0.3), vf[c] = float(var[c] * 1.7 + 0.1);
          m = p.from_host(mf, {C}, DType::f32);
          v = p.from_host(vf, {C}, DType::f32);
          ops::batchnorm_eval_forward(p.ctx, x, gamma, beta, m, v, eps, relu, y);
        }
        const std::vector<double> mu = training ? mean : p.host(m);
        const std::vector<double> sig = training ? var : p.host(v);
        const std::vector<double> yd = p.host(y);
        std::vector<double> y_ref(static_cast<size_t>(n)), g(static_cast<size_t>(n)), xhat(static_cast<size_t>(n));
        std::vector<double> sg(static_cast<size_t>(C), 0.0), sgx(static_cast<size_t>(C), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t c = i % C;
          xhat[i] = (xd[i] - mu[c]) / std::sqrt(sig[c] + eps);
          const double pre = gd[c] * xhat[i] + bd[c];
          y_ref[i] = relu ? std::max(pre, 0.0) : pre;
          g[i] = relu && !(yd[i] > 0) ? 0.0 : dyd[i];  // the op masks with its own output
          sg[c] += g[i];
          sgx[c] += g[i] * xhat[i];
        }
        p.expect_close(y, y_ref, "batchnorm forward");
        std::vector<double> dx_ref(static_cast<size_t>(n)), dg_ref(static_cast<size_t>(C)), db_ref(static_cast<size_t>(C));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t c = i % C;
          const double k = gd[c] / std::sqrt(sig[c] + eps);
          dx_ref[i] = training ? k * (g[i] - sg[c] / rows - xhat[i] * sgx[c] / rows) : k * g[i];
        }
        for (int64_t c = 0; c < C; ++c) dg_ref[c] = 0.5 + sgx[c], db_ref[c] = 0.5 + sg[c];
        Tensor dx = p.zeros(xs, t), dg = p.zeros({C}, DType::f32), db = p.zeros({C}, DType::f32);
        ops::fill(p.ctx, dg, 0.5f);
        ops::fill(p.ctx, db, 0.5f);
        ops::batchnorm_backward(p.ctx, x, y, dy, gamma, m, v, eps, relu, training, dx, dg, db);
        p.expect_close(dx, dx_ref, "batchnorm backward dx", t == DType::f32 ? 2e-5 : 0);
        p.expect_close(dg, dg_ref, "batchnorm backward dgamma", 1e-5);
        p.expect_close(db, db_ref, "batchnorm backward dbeta", 1e-5);
      }
    }
  }
}

// Training statistics where a single read of x could lose them: a channel whose mean is large
// against its spread (E[x²] - E[x]² in f32 would cancel it away), and one whose every 1000th row,
// the rows a shift might be sampled from, holds an outlier far from the mean.
TEST(ParityCnn, BatchNormStatisticsHoldFarFromZeroAndAroundOutliers) {
  Parity p;
  const int64_t rows = 64000, C = 3;
  std::vector<float> xv = testing::random_normal(rows * C, 500);
  for (int64_t r = 0; r < rows; ++r) {
    xv[size_t(r * C)] = 1000.0f + 0.01f * xv[size_t(r * C)];
    if (r % 1000 == 0) xv[size_t(r * C + 1)] = 1000.0f;
  }
  const Tensor x = p.from_host(xv, {rows, C}, DType::f32);
  const Tensor gamma = p.random({C}, DType::f32, 501), beta = p.random({C}, DType::f32, 502);
  const std::vector<double> xd = p.host(x);
  std::vector<double> mean(size_t(C), 0.0), var(size_t(C), 0.0);
  for (size_t i = 0; i < xd.size(); ++i) mean[i % size_t(C)] += xd[i] / double(rows);
  for (size_t i = 0; i < xd.size(); ++i) var[i % size_t(C)] += std::pow(xd[i] - mean[i % size_t(C)], 2) / double(rows);
  Tensor y = p.zeros({rows, C}, DType::f32), m = p.zeros({C}, DType::f32), v = p.zeros({C}, DType::f32);
  ops::batchnorm_train_forward(p.ctx, x, gamma, beta, 1e-5f, false, y, m, v);
  const std::vector<double> got_mean = p.host(m), got_var = p.host(v);
  for (size_t c = 0; c < size_t(C); ++c) {  // each channel against its own scale
    EXPECT_NEAR(got_mean[c], mean[c], 1e-6 * (std::abs(mean[c]) + std::sqrt(var[c]))) << "channel " << c;
    EXPECT_NEAR(got_var[c], var[c], 1e-5 * var[c]) << "channel " << c;
  }
}

// A residual block's join in batch norm's normalising pass: y = max?(bn(x) + shortcut), training
// and eval, rounded once; a shortcut that does not match x is an error.
TEST(ParityCnn, BatchNormAddsTheShortcutBeforeTheRelu) {
  Parity p;
  uint32_t id = 300;
  const float eps = 1e-5f;
  const int64_t C = 13;
  const Shape xs{2, 5, 3, C};
  const int64_t n = shape_numel(xs), rows = n / C;
  for (DType t : testing::float_dtypes())
    for (bool relu : {true, false})
      for (bool training : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " relu " << relu << " training " << training);
        const Tensor x = p.random(xs, t, id++, 2.0f), r = p.random(xs, t, id++, 3.0f);
        const Tensor gamma = p.random({C}, DType::f32, id++), beta = p.random({C}, DType::f32, id++);
        const std::vector<double> xd = p.host(x), rd = p.host(r), gd = p.host(gamma), bd = p.host(beta);
        std::vector<double> mean(size_t(C), 0.0), var(size_t(C), 0.0);
        for (int64_t i = 0; i < n; ++i) mean[i % C] += xd[i] / double(rows);
        for (int64_t i = 0; i < n; ++i) var[i % C] += std::pow(xd[i] - mean[i % C], 2) / double(rows);
        if (!training)
          for (int64_t c = 0; c < C; ++c) mean[c] += 0.25, var[c] = var[c] * 1.5 + 0.1;
        Tensor m = p.from_host(std::vector<float>(mean.begin(), mean.end()), {C}, DType::f32);
        Tensor v = p.from_host(std::vector<float>(var.begin(), var.end()), {C}, DType::f32);
        if (!training) mean = p.host(m), var = p.host(v);  // the f32 statistics the op reads
        Tensor y = p.zeros(xs, t);
        if (training) ops::batchnorm_train_forward(p.ctx, x, gamma, beta, eps, relu, y, m, v, r);
        else ops::batchnorm_eval_forward(p.ctx, x, gamma, beta, m, v, eps, relu, y, r);
        std::vector<double> y_ref(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t c = i % C;
          const double pre = gd[c] * (xd[i] - mean[c]) / std::sqrt(var[c] + eps) + bd[c] + rd[i];
          y_ref[i] = relu ? std::max(pre, 0.0) : pre;
        }
        p.expect_close(y, y_ref, "batchnorm forward with a shortcut");
        Tensor wrong = p.zeros({2, 5, 4, C}, t), other = p.zeros(xs, t == DType::f32 ? DType::bf16 : DType::f32);
        EXPECT_THROW(ops::batchnorm_eval_forward(p.ctx, x, gamma, beta, m, v, eps, relu, y, wrong), Error);
        EXPECT_THROW(ops::batchnorm_eval_forward(p.ctx, x, gamma, beta, m, v, eps, relu, y, other), Error);
      }
}

TEST(ParityCnn, BatchNormRunningStatisticsAreBitwiseTheHostFormula) {
  Parity p;
  const int64_t C = 37, rows = 50;
  const float momentum = 0.1f;
  const std::vector<float> mean = testing::random_normal(C, 1), var0 = testing::random_normal(C, 2);
  std::vector<float> var(var0.size()), rm = testing::random_normal(C, 3), rv(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) var[c] = std::abs(var0[c]), rv[c] = 1.0f + 0.1f * float(c);
  Tensor m = p.from_host(mean, {C}, DType::f32), v = p.from_host(var, {C}, DType::f32);
  Tensor trm = p.from_host(rm, {C}, DType::f32), trv = p.from_host(rv, {C}, DType::f32);
  Tensor count = p.zeros({1}, DType::f32);
  for (int step = 0; step < 3; ++step) {
    ops::batchnorm_update_running(p.ctx, m, v, rows, momentum, trm, trv, count);
    // PyTorch's update, its one multiply-add fused so that no compiler may round it otherwise.
    const float unbias = float(double(rows) / double(rows - 1));
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = std::fma(momentum, mean[c], (1.0f - momentum) * rm[c]);
      rv[c] = std::fma(momentum, var[c] * unbias, (1.0f - momentum) * rv[c]);
    }
  }
  const std::vector<double> got_m = p.host(trm), got_v = p.host(trv);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(float(got_m[c]), rm[c]) << c;
    EXPECT_EQ(float(got_v[c]), rv[c]) << c;
  }
  EXPECT_EQ(p.host(count)[0], 3.0);
  EXPECT_THROW(ops::batchnorm_update_running(p.ctx, m, v, 1, momentum, trm, trv, count), Error);
}

TEST(ParityCnn, MaxPoolMatchesReferenceAndRoutesGradientsInEveryDtype) {
  Parity p;
  Draw draw(13);
  uint32_t id = 300;
  for (int trial = 0; trial < 6; ++trial) {
    ops::PoolShape s;
    s.N = draw(1, 3), s.C = draw(1, 9);
    s.R = s.S = draw(1, 3);
    s.stride_h = s.stride_w = draw(1, 2);
    s.pad_h = s.pad_w = draw(0, s.R / 2);
    s.H = draw(s.R, 9), s.W = draw(s.S, 9);
    const Shape xs{s.N, s.H, s.W, s.C}, ys{s.N, s.P(), s.Q(), s.C};
    for (DType t : testing::float_dtypes()) {
      SCOPED_TRACE(::testing::Message() << shape_str(xs) << " window " << s.R << " stride "
                                      << s.stride_h << " pad " << s.pad_h << " " << dtype_name(t));
      const Tensor x = p.random(xs, t, id++), dy = p.random(ys, t, id++);
      const std::vector<double> xd = p.host(x), dyd = p.host(dy);
      std::vector<double> y_ref(static_cast<size_t>(shape_numel(ys))), dx_ref(xd.size(), 0.0);
      for (int64_t n = 0; n < s.N; ++n)
        for (int64_t pp = 0; pp < s.P(); ++pp)
          for (int64_t q = 0; q < s.Q(); ++q)
            for (int64_t c = 0; c < s.C; ++c) {
              double best = -1e300;
              int64_t at = -1;
              for (int64_t i = 0; i < s.R; ++i)
                for (int64_t j = 0; j < s.S; ++j) {
                  const int64_t h = pp * s.stride_h - s.pad_h + i, w = q * s.stride_w - s.pad_w + j;
                  if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
                  const int64_t xi = ((n * s.H + h) * s.W + w) * s.C + c;
                  if (xd[xi] > best) best = xd[xi], at = xi;
                }
              const int64_t yi = ((n * s.P() + pp) * s.Q() + q) * s.C + c;
              y_ref[yi] = best;
              dx_ref[at] += dyd[yi];
            }
      Tensor y = p.zeros(ys, t), argmax = p.zeros(ys, DType::i32), dx = p.zeros(xs, t);
      ops::maxpool_forward(p.ctx, s, x, y, argmax);
      EXPECT_EQ(p.host(y), y_ref);  // a maximum is one of the inputs: exact
      ops::maxpool_backward(p.ctx, s, dy, argmax, dx);
      p.expect_close(dx, dx_ref, "maxpool_backward");
    }
  }
}

TEST(ParityCnn, GlobalAvgPoolMatchesFloat64BetweenEveryDtypePair) {
  Parity p;
  Draw draw(17);
  uint32_t id = 400;
  for (int trial = 0; trial < 3; ++trial) {
    const int64_t N = draw(1, 4), H = draw(1, 7), W = draw(1, 7), C = draw(1, 33);
    for (DType in : testing::float_dtypes())
      for (DType out : testing::float_dtypes()) {
        SCOPED_TRACE(::testing::Message() << N << "x" << H << "x" << W << "x" << C << " "
                                        << dtype_name(in) << " -> " << dtype_name(out));
        const Tensor x = p.random({N, H, W, C}, in, id++), dy = p.random({N, C}, out, id++);
        const std::vector<double> xd = p.host(x), dyd = p.host(dy);
        std::vector<double> y_ref(static_cast<size_t>(N * C), 0.0), dx_ref(xd.size());
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < H * W; ++i)
            for (int64_t c = 0; c < C; ++c) {
              y_ref[n * C + c] += xd[(n * H * W + i) * C + c] / double(H * W);
              dx_ref[(n * H * W + i) * C + c] = dyd[n * C + c] / double(H * W);
            }
        Tensor y = p.zeros({N, C}, out), dx = p.zeros({N, H, W, C}, in);
        ops::global_avgpool_forward(p.ctx, x, y);
        p.expect_close(y, y_ref, "global_avgpool_forward");
        ops::global_avgpool_backward(p.ctx, dy, dx);
        p.expect_close(dx, dx_ref, "global_avgpool_backward");
      }
  }
}

TEST(ParityCnn, ReluAndGradientAddMatchFloat64InEveryDtype) {
  Parity p;
  uint32_t id = 500;
  for (const Shape& shape : {Shape{50}, Shape{3, 5, 7, 11}, Shape{40000}})
    for (DType t : testing::float_dtypes()) {
      SCOPED_TRACE(::testing::Message() << shape_str(shape) << " " << dtype_name(t));
      const Tensor a = p.random(shape, t, id++), b = p.random(shape, t, id++),
                   g = p.random(shape, t, id++);
      const std::vector<double> ad = p.host(a), bd = p.host(b), gd = p.host(g);
      std::vector<double> r_ref(ad.size()), d_ref(ad.size()), s_ref(ad.size());
      for (size_t i = 0; i < ad.size(); ++i) {
        r_ref[i] = std::max(ad[i], 0.0);
        d_ref[i] = ad[i] > 0 ? gd[i] : 0.0;
        s_ref[i] = bd[i] + gd[i];
      }
      Tensor r = p.zeros(shape, t), d = p.zeros(shape, t);
      ops::relu_forward(p.ctx, a, r);
      EXPECT_EQ(p.host(r), r_ref);  // exact: max with 0 rounds nothing
      ops::relu_backward(p.ctx, r, g, d);
      EXPECT_EQ(p.host(d), d_ref);
      // A join's gradient in two parts, added under the mask and rounded once.
      std::vector<double> sum_ref(ad.size());
      for (size_t i = 0; i < ad.size(); ++i) sum_ref[i] = ad[i] > 0 ? gd[i] + bd[i] : 0.0;
      Tensor ds = p.zeros(shape, t);
      ops::relu_backward(p.ctx, r, g, ds, b);
      p.expect_close(ds, sum_ref, "relu_backward of a sum");
      const Tensor other = p.zeros(shape, t == DType::f32 ? DType::bf16 : DType::f32);
      EXPECT_THROW(ops::relu_backward(p.ctx, r, g, ds, other), Error);
      // The mask at the edges of "> 0": signed zeros, the smallest subnormal, infinities, NaN.
      const float tiny = t == DType::f32 ? std::numeric_limits<float>::denorm_min()
                         : t == DType::bf16 ? 9.1835e-41f : 5.9604645e-8f;
      const float inf = std::numeric_limits<float>::infinity();
      const std::vector<float> edges = {-0.0f, 0.0f, tiny, -tiny, -1.0f, 1.0f, inf, -inf,
                                        std::numeric_limits<float>::quiet_NaN()};
      const Shape es{int64_t(edges.size())};
      const Tensor ey = p.from_host(edges, es, t), eg = p.from_host(std::vector<float>(edges.size(), 2.0f), es, t);
      Tensor ed = p.zeros(es, t);
      ops::relu_backward(p.ctx, ey, eg, ed);
      const std::vector<double> ey_host = p.host(ey);
      EXPECT_GT(ey_host[2], 0.0) << "the subnormal survives the conversion to " << dtype_name(t);
      std::vector<double> ed_ref;
      for (double v : ey_host) ed_ref.push_back(v > 0 ? 2.0 : 0.0);
      EXPECT_EQ(p.host(ed), ed_ref);
      Tensor s = p.from_host(std::vector<float>(bd.begin(), bd.end()), shape, t);
      ops::residual_add(p.ctx, g, s);
      p.expect_close(s, s_ref, "residual_add");
      Tensor mismatched = p.zeros(shape, t == DType::f32 ? DType::bf16 : DType::f32);
      EXPECT_THROW(ops::residual_add(p.ctx, g, mismatched), Error);
    }
}

}  // namespace
}  // namespace kiln
