// Parity of the multi-tensor norm, scaling and fused optimizer ops against float64 references,
// over segments with gaps between them (left untouched), with the weights' compute copy in
// bf16 and f16 refreshed in the same pass.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>

#include "kiln/core/error.h"
#include "parity.h"
#include "segments.h"

namespace kiln {
namespace {

using testing::Parity;

// Segments of assorted sizes (one spans several sum chunks) with 5-element gaps.
std::vector<ops::TensorSegment> make_segments(int64_t& total) {
  return testing::spaced_segments({1, 37, 3 * ops::kSumChunk + 11, 256, 1000}, total);
}

std::vector<double> read_f64(Parity& p, const Tensor& t) {
  std::vector<double> host(size_t(t.numel()));
  Tensor view = Tensor::view(host.data(), t.shape, DType::i64);
  ops::copy(p.ctx, t, view);
  return host;
}

// A step's scalars block on the device: zeros, factor 1, then `set`.
Tensor step_block(Parity& p, std::initializer_list<std::pair<ops::StepScalar, double>> set) {
  std::vector<double> host(ops::kStepScalars, 0.0);
  host[ops::kStepGradFactor] = 1.0;
  for (const auto& [slot, value] : set) host[size_t(slot)] = value;
  Tensor block = Tensor::empty({ops::kStepScalars}, DType::i64, p.ctx.device);
  ops::copy(p.ctx, Tensor::view(host.data(), {ops::kStepScalars}, DType::i64), block);
  return block;
}

// Elements outside every segment must keep their values.
void expect_gaps_untouched(const std::vector<double>& before, const std::vector<double>& after,
                           const std::vector<ops::TensorSegment>& segs, const char* what) {
  std::vector<bool> inside(before.size(), false);
  for (const auto& s : segs)
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) inside[size_t(i)] = true;
  for (size_t i = 0; i < before.size(); ++i)
    if (!inside[i]) {
      ASSERT_EQ(before[i], after[i]) << what << " gap element " << i;
    }
}

TEST(ParityOptim, SegmentSumSquaresMatchesFloat64AndIsThreadCountIndependent) {
  Parity p;
  int64_t n = 0;
  const auto segs = make_segments(n);
  const Tensor a = p.random({n}, DType::f32, 1), b = p.random({n}, DType::f32, 2, 0.1f);
  const std::vector<double> ad = p.host(a), bd = p.host(b);
  Tensor one = Tensor::empty({int64_t(segs.size())}, DType::i64, p.ctx.device);
  Tensor two = Tensor::empty({int64_t(segs.size()), 2}, DType::i64, p.ctx.device);
  const int saved = omp_get_max_threads();
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    ops::segment_sum_squares(p.ctx, a, Tensor{}, segs, one);
    ops::segment_sum_squares(p.ctx, a, b, segs, two);
    std::vector<double> r = read_f64(p, one);
    for (double x : read_f64(p, two)) r.push_back(x);
    runs.push_back(r);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(runs[0], runs[1]);  // bitwise
  for (size_t k = 0; k < segs.size(); ++k) {
    double sa = 0, sb = 0;
    for (int64_t i = segs[k].offset; i < segs[k].offset + segs[k].numel; ++i)
      sa += ad[size_t(i)] * ad[size_t(i)], sb += bd[size_t(i)] * bd[size_t(i)];
    EXPECT_NEAR(runs[0][k], sa, 1e-12 * sa) << k;
    EXPECT_NEAR(runs[0][segs.size() + 2 * k], sa, 1e-12 * sa) << k;
    EXPECT_NEAR(runs[0][segs.size() + 2 * k + 1], sb, 1e-12 * sb) << k;
  }
  Tensor wrong = Tensor::empty({3}, DType::i64, p.ctx.device);
  EXPECT_THROW(ops::segment_sum_squares(p.ctx, a, Tensor{}, segs, wrong), Error);
  const std::vector<ops::TensorSegment> outside = {{n - 2, 5, true}};
  Tensor single = Tensor::empty({1}, DType::i64, p.ctx.device);
  EXPECT_THROW(ops::segment_sum_squares(p.ctx, a, Tensor{}, outside, single), Error);
}

TEST(ParityOptim, ScaleByStepScalarReadsTheBlockWhenItRuns) {
  Parity p;
  const int64_t n = 100003;
  Tensor x = p.random({n}, DType::f32, 3);
  const std::vector<double> xd = p.host(x);
  Tensor block = step_block(p, {{ops::kStepUnscale, 0.25}, {ops::kStepGradFactor, 1.0}});
  ops::scale_by_step_scalar(p.ctx, x, block, ops::kStepUnscale);
  std::vector<double> want(xd);
  for (double& v : want) v *= 0.25;
  p.expect_close(x, want, "scale_by_step_scalar", 1e-30);
  ops::scale_by_step_scalar(p.ctx, x, block, ops::kStepGradFactor);  // 1: unchanged
  p.expect_close(x, want, "scale_by_step_scalar by 1", 1e-30);
  ops::scale_all(p.ctx, x, 4.0f);
  p.expect_close(x, xd, "scale_all", 1e-30);
  Tensor short_block = Tensor::empty({3}, DType::i64, p.ctx.device);
  EXPECT_THROW(ops::scale_by_step_scalar(p.ctx, x, short_block, ops::kStepUnscale), Error);
}

TEST(ParityOptim, StepNormAndDecisionMatchTheHostRules) {
  Parity p;
  const std::vector<double> sums = {4.0, 9.0, 1e-3, 16.0};
  const std::vector<int32_t> owner_flags = {1, 0, 1, 1};
  Tensor sums_d = Tensor::empty({4}, DType::i64, p.ctx.device), owners = Tensor::empty({4}, DType::i32, p.ctx.device);
  ops::copy(p.ctx, Tensor::view(const_cast<double*>(sums.data()), {4}, DType::i64), sums_d);
  ops::copy(p.ctx, Tensor::view(const_cast<int32_t*>(owner_flags.data()), {4}, DType::i32), owners);
  const double owned = 4.0 + 1e-3 + 16.0, norm = std::sqrt(owned);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    double max_norm, loss;
    bool skip;
    double factor;
  };
  for (const Case& c : {Case{0.0, 1.5, false, 1.0}, Case{1.0, 1.5, false, double(float(1.0 / norm))},
                        Case{2 * norm, 1.5, false, 1.0}, Case{1.0, nan, true, double(float(1.0 / norm))},
                        Case{0.0, inf, true, 1.0}}) {
    Tensor block = step_block(p, {{ops::kStepMaxNorm, c.max_norm}, {ops::kStepLoss, c.loss}});
    ops::step_norm_squares(p.ctx, sums_d, owners, block);
    ops::step_decide(p.ctx, block);
    const std::vector<double> got = read_f64(p, block);
    EXPECT_EQ(got[ops::kStepNormSquares], owned);  // in order of the parameters
    EXPECT_EQ(got[ops::kStepNorm], norm);
    EXPECT_EQ(got[ops::kStepSkip], c.skip ? 1.0 : 0.0) << c.max_norm << " " << c.loss;
    EXPECT_EQ(got[ops::kStepGradFactor], c.factor) << c.max_norm << " " << c.loss;
  }
  for (double bad_square : {inf, nan}) {  // a non-finite gradient makes the norm so
    Tensor block = step_block(p, {{ops::kStepNormSquares, bad_square}, {ops::kStepMaxNorm, 1.0}});
    ops::step_decide(p.ctx, block);
    EXPECT_EQ(read_f64(p, block)[ops::kStepSkip], 1.0) << bad_square;
  }
  Tensor wrong = Tensor::empty({3}, DType::i32, p.ctx.device);
  Tensor block = step_block(p, {});
  EXPECT_THROW(ops::step_norm_squares(p.ctx, sums_d, wrong, block), Error);
}

struct OptimCase {
  int64_t n = 0;
  std::vector<ops::TensorSegment> segs;
  std::vector<double> w, g, m, v;
  Tensor W, G, M, V;
};

OptimCase make_case(Parity& p, uint32_t id) {
  OptimCase c;
  c.segs = make_segments(c.n);
  c.W = p.random({c.n}, DType::f32, id, 0.5f);
  c.G = p.random({c.n}, DType::f32, id + 1, 0.1f);
  c.M = p.random({c.n}, DType::f32, id + 2, 0.01f);
  std::vector<float> vh = testing::random_normal(c.n, id + 3, 1e-3f);
  for (float& x : vh) x = x * x;  // second moments are not negative
  c.V = p.from_host(vh, {c.n}, DType::f32);
  c.w = p.host(c.W), c.g = p.host(c.G), c.m = p.host(c.M), c.v = p.host(c.V);
  return c;
}

// The compute copy is cast(w) after the update, and padding keeps its old value.
void expect_compute(Parity& p, const Tensor& W, const Tensor& C, const char* what) {
  if (!C.defined()) return;
  Tensor want = Tensor::empty(C.shape, C.dtype, p.ctx.device);
  ops::cast(p.ctx, W, want);
  EXPECT_EQ(p.host(C), p.host(want)) << what << " compute copy in " << dtype_name(C.dtype);
}

TEST(ParityOptim, AdamWAndLambMatchFloat64Reference) {
  for (DType compute : {DType::f32, DType::bf16, DType::f16})
    for (bool lamb : {false, true}) {
      Parity p;
      OptimCase c = make_case(p, lamb ? 20 : 10);
      Tensor C;
      if (compute != DType::f32) {
        C = Tensor::empty({c.n}, compute, p.ctx.device);
        ops::cast(p.ctx, c.W, C);
      }
      const ops::AdamStep s{0.9f, 0.999f, 1e-6f, 0.1f};
      const double lr = 0.01, bc1 = double(0.271f), bc2 = double(0.00299f), factor = double(0.37f);  // clipped
      Tensor block = step_block(p, {{ops::kStepLr, lr}, {ops::kStepBc1, bc1}, {ops::kStepBc2, bc2},
                                    {ops::kStepGradFactor, factor}});
      Tensor norms = Tensor::empty({int64_t(c.segs.size()), 2}, DType::i64, p.ctx.device);
      if (lamb) {
        ops::lamb_moments(p.ctx, s, block, c.segs, c.W, Tensor{}, c.G, c.M, c.V, norms);
        ops::lamb_update(p.ctx, s, block, c.segs, norms, c.W, c.M, c.V, C);
      } else {
        ops::adamw_update(p.ctx, s, block, c.segs, c.W, c.G, c.M, c.V, C);
      }
      std::vector<double> w = c.w, m = c.m, v = c.v;
      for (const auto& seg : c.segs) {
        const double wd = seg.decay ? s.weight_decay : 0.0;
        std::vector<double> u(size_t(seg.numel));
        double wn = 0, un = 0;
        for (int64_t e = 0; e < seg.numel; ++e) {
          const size_t i = size_t(seg.offset + e);
          const double g = float(factor) * c.g[i];
          m[i] = s.beta1 * m[i] + (1 - double(s.beta1)) * g;
          v[i] = s.beta2 * v[i] + (1 - double(s.beta2)) * g * g;
          u[size_t(e)] = m[i] / bc1 / (std::sqrt(v[i] / bc2) + s.eps) + wd * w[i];
          wn += w[i] * w[i], un += u[size_t(e)] * u[size_t(e)];
        }
        const double r = lamb ? std::sqrt(wn) / std::sqrt(un) : 1.0;
        for (int64_t e = 0; e < seg.numel; ++e) w[size_t(seg.offset + e)] -= lr * r * u[size_t(e)];
      }
      const char* what = lamb ? "lamb" : "adamw";
      p.expect_close(c.M, m, what);
      p.expect_close(c.V, v, what);
      // The update is ~lr relative to w: compare the change.
      std::vector<double> dw(w.size()), want_dw(w.size());
      const std::vector<double> got = p.host(c.W);
      for (size_t i = 0; i < w.size(); ++i) dw[i] = got[i] - c.w[i], want_dw[i] = w[i] - c.w[i];
      EXPECT_LE(testing::max_rel_error(dw, want_dw), 1e-4) << what;
      expect_gaps_untouched(c.w, got, c.segs, what);
      expect_compute(p, c.W, C, what);
    }
}

TEST(ParityOptim, LarsMatchesFloat64Reference) {
  for (DType compute : {DType::f32, DType::bf16, DType::f16}) {
    Parity p;
    OptimCase c = make_case(p, 30);
    Tensor C;
    if (compute != DType::f32) {
      C = Tensor::empty({c.n}, compute, p.ctx.device);
      ops::cast(p.ctx, c.W, C);
    }
    const ops::LarsStep s{0.9f, 1e-4f, 0.001f, 1e-9f};
    const double lr = 0.5;
    Tensor norms = Tensor::empty({int64_t(c.segs.size()), 2}, DType::i64, p.ctx.device);
    ops::segment_sum_squares(p.ctx, c.W, c.G, c.segs, norms);
    ops::lars_update(p.ctx, s, step_block(p, {{ops::kStepLr, lr}}), c.segs, norms, c.W, c.G, c.M, C);
    std::vector<double> w = c.w, mom = c.m;
    for (const auto& seg : c.segs) {
      double wn = 0, gn = 0;
      for (int64_t i = seg.offset; i < seg.offset + seg.numel; ++i)
        wn += w[size_t(i)] * w[size_t(i)], gn += c.g[size_t(i)] * c.g[size_t(i)];
      wn = std::sqrt(wn), gn = std::sqrt(gn);
      const double wd = seg.decay ? s.weight_decay : 0.0;
      const double r = seg.decay ? s.eeta * wn / (gn + wd * wn + s.epsilon) : 1.0;
      for (int64_t i = seg.offset; i < seg.offset + seg.numel; ++i) {
        mom[size_t(i)] = s.momentum * mom[size_t(i)] + lr * r * (c.g[size_t(i)] + wd * w[size_t(i)]);
        w[size_t(i)] -= mom[size_t(i)];
      }
    }
    p.expect_close(c.M, mom, "lars momentum");
    p.expect_close(c.W, w, "lars weights");
    expect_gaps_untouched(c.w, p.host(c.W), c.segs, "lars");
    expect_compute(p, c.W, C, "lars");
  }
}

TEST(ParityOptim, SkippedStepChangesNothing) {
  Parity p;
  OptimCase c = make_case(p, 40);
  Tensor C = Tensor::empty({c.n}, DType::bf16, p.ctx.device);
  ops::cast(p.ctx, c.W, C);
  const std::vector<double> compute = p.host(C);
  Tensor block = step_block(p, {{ops::kStepLr, 0.1}, {ops::kStepBc1, 0.1}, {ops::kStepBc2, 0.01},
                                {ops::kStepSkip, 1.0}});
  const ops::AdamStep adam{0.9f, 0.999f, 1e-6f, 0.1f};
  Tensor norms = Tensor::empty({int64_t(c.segs.size()), 2}, DType::i64, p.ctx.device);
  ops::adamw_update(p.ctx, adam, block, c.segs, c.W, c.G, c.M, c.V, C);
  ops::lamb_moments(p.ctx, adam, block, c.segs, c.W, Tensor{}, c.G, c.M, c.V, norms);
  for (double x : read_f64(p, norms)) EXPECT_EQ(x, 0.0);
  ops::segment_sum_squares(p.ctx, c.W, c.G, c.segs, norms);
  ops::lamb_update(p.ctx, adam, block, c.segs, norms, c.W, c.M, c.V, C);
  ops::lars_update(p.ctx, ops::LarsStep{}, block, c.segs, norms, c.W, c.G, c.M, C);
  EXPECT_EQ(p.host(c.W), c.w);
  EXPECT_EQ(p.host(c.M), c.m);
  EXPECT_EQ(p.host(c.V), c.v);
  EXPECT_EQ(p.host(C), compute);
}

}  // namespace
}  // namespace kiln
