// backend/cuda/layernorm_bodies.h — LayerNorm's CUDA bodies (elementwise_bodies.h says how they run), cut so
// that every launch has many items and neighbouring items read neighbouring elements: a row's
// sums are taken by kRowLanes lanes (lane l adds elements l, l + kRowLanes, ... in double), one
// item per row adds its lanes in lane order, and one item per element applies the result. The
// parameter gradients are summed per (chunk of kLayerNormGradRows rows, column) in f32 and then
// per column over the chunks in double, in order: the CPU backend's sums, bit for bit.
//
// Where x, y (sum, dy, dx) and the weights share a dtype T, C is a multiple of the span width W
// (vec_access.h: 8 bf16 / f16, 4 f32) and every operand is 16-byte aligned, the passes run as
// span bodies (*SpanBody): a lane-group item does the work of W neighbouring lanes (W
// accumulators, the same elements in the same order: the same partial sums, bit for bit) reading
// a span of W elements per step, and the element passes take a span per item, its row and
// column from one division. HBM traffic per element in bf16 (f32: twice; mean, rstd, weights
// and partials are per row or per column, in cache): forward 2 B (moments) + 4 B (apply) = 6 B,
// with the residual join 6 B + 4 B = 10 B; backward 4 B (parameter chunks: a span of W columns
// per item) + 4 B (dx lanes) + 6 B (dx apply, 8 B with accumulate) = 14 B. BERT-large S512
// batch 16, (8192, 1024) bf16: the add + LayerNorm forward moves 84 MB, 25 / 18 us at 100% of an
// H100's / H200's HBM, 36 / 25 us at the 70% target; the backward 117 MB, 50 / 35 us at 70%. A row's
// lane-group pass has 32 / W items per row (4 in bf16: 32768 threads for 8192 rows, each with 32
// independent 16-byte loads): enough loads in flight to cover HBM latency, not a full GPU.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/vec_access.h"

namespace kiln::ops::cuda {

// Item = lane of a row (item = r * kRowLanes + l): partial[item] = (Σ x, Σ x²) over its elements.
// With `residual` (the residual join before a LayerNorm), x's elements are first replaced by
// sum = x + residual, rounded to sum's dtype and written there, and the moments are sum's.
struct RowMomentsLaneBody {
  FloatPtr x;
  int64_t C;
  double* partial;  // 2 per item
  FloatPtr residual = {}, sum = {};
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kRowLanes) * C;
    double s = 0.0, s2 = 0.0;
    for (int64_t c = item % kRowLanes; c < C; c += kRowLanes) {
      if (residual.p) sum.set(o + c, x[o + c] + residual[o + c]);
      const double v = residual.p ? sum[o + c] : x[o + c];
      s += v;
      s2 += v * v;
    }
    partial[2 * item] = s;
    partial[2 * item + 1] = s2;
  }
};

// RowMomentsLaneBody for W lanes per item (item = r (kRowLanes / W) + g: lanes gW .. gW + W - 1),
// their elements read as spans: lane gW + j's elements are element j of the spans at gW, gW +
// kRowLanes, ... The host launches it only where C % W == 0 and the operands are aligned.
template <typename T>
struct RowMomentsSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* x;
  int64_t C;
  double* partial;  // 2 per lane
  const T* residual = nullptr;
  T* sum = nullptr;
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kGroups) * C;
    double s[W] = {}, s2[W] = {};
    for (int64_t c = (item % kGroups) * W; c < C; c += kRowLanes) {
      float v[W];
      load_packs<W>(x + o + c, v);
      if (residual) {
        float u[W];
        load_packs<W>(residual + o + c, u);
        for (int j = 0; j < W; ++j) v[j] = v[j] + u[j];
        store_packs<W>(sum + o + c, v);
        for (int j = 0; j < W; ++j) v[j] = load(store<T>(v[j]));
      }
      for (int j = 0; j < W; ++j) {
        const double d = v[j];
        s[j] += d;
        s2[j] += d * d;
      }
    }
    for (int j = 0; j < W; ++j) {
      partial[2 * (item * W + j)] = s[j];
      partial[2 * (item * W + j) + 1] = s2[j];
    }
  }
};

// Item r: mean = Σx / C and rstd = 1 / sqrt(Σx² / C - mean² + eps), in double from the lanes' sums.
struct LayerNormStatsBody {
  const double* partial;
  int64_t C;
  float eps;
  float* mean;
  float* rstd;
  KILN_HD void operator()(int64_t r) const {
    double s = 0.0, s2 = 0.0;
    for (int64_t j = r * kRowLanes; j < (r + 1) * kRowLanes; ++j) s += partial[2 * j], s2 += partial[2 * j + 1];
    const double m = s / double(C), var = s2 / double(C) - m * m;
    mean[r] = float(m);
    rstd[r] = float(1.0 / sqrt((var > 0.0 ? var : 0.0) + double(eps)));
  }
};

// Item i = element i of (N, C): y = (x - mean) rstd w + b. y may alias x.
struct LayerNormApplyBody {
  FloatPtr x, w, b, y;
  const float* mean;
  const float* rstd;
  int64_t C;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / C, c = i % C;
    y.set(i, (x[i] - mean[r]) * rstd[r] * w[c] + b[c]);
  }
};

// LayerNormApplyBody over spans: item k = elements [k W, k W + W) of one row (C % W == 0). Its
// products are mul_rn's (vec_access.h), as unfused as LayerNormApplyBody's.
template <typename T>
struct LayerNormApplySpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* x;
  const T* w;
  const T* b;
  T* y;
  const float* mean;
  const float* rstd;
  int64_t C;
  KILN_HD void operator()(int64_t k) const {
    const QuotRem rc = divide(k * W, C);
    float v[W], wv[W], bv[W];
    load_packs<W>(x + k * W, v);
    load_packs<W>(w + rc.r, wv);
    load_packs<W>(b + rc.r, bv);
    const float m = mean[rc.q], s = rstd[rc.q];
    for (int j = 0; j < W; ++j) v[j] = mul_rn((v[j] - m) * s, wv[j]) + bv[j];
    store_packs<W>(y + k * W, v);
  }
};

// Item = lane of a row: partial[item] = (Σ g, Σ g xhat) over its elements, g = dy w,
// xhat = (x - mean) rstd.
struct LayerNormGradLaneBody {
  FloatPtr x, dy, w;
  const float* mean;
  const float* rstd;
  int64_t C;
  double* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const int64_t r = item / kRowLanes, o = r * C;
    double sg = 0.0, sgx = 0.0;
    for (int64_t c = item % kRowLanes; c < C; c += kRowLanes) {
      const float g = dy[o + c] * w[c];
      sg += g;
      sgx += double(g) * double((x[o + c] - mean[r]) * rstd[r]);
    }
    partial[2 * item] = sg;
    partial[2 * item + 1] = sgx;
  }
};

// LayerNormGradLaneBody for W lanes per item, as RowMomentsSpanBody.
template <typename T>
struct LayerNormGradSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* x;
  const T* dy;
  const T* w;
  const float* mean;
  const float* rstd;
  int64_t C;
  double* partial;  // 2 per lane
  KILN_HD void operator()(int64_t item) const {
    const int64_t r = item / kGroups, o = r * C;
    const float m = mean[r], s = rstd[r];
    double sg[W] = {}, sgx[W] = {};
    for (int64_t c = (item % kGroups) * W; c < C; c += kRowLanes) {
      float v[W], d[W], wv[W];
      load_packs<W>(x + o + c, v);
      load_packs<W>(dy + o + c, d);
      load_packs<W>(w + c, wv);
      for (int j = 0; j < W; ++j) {
        const float g = d[j] * wv[j];
        sg[j] += g;
        sgx[j] += double(g) * double((v[j] - m) * s);
      }
    }
    for (int j = 0; j < W; ++j) {
      partial[2 * (item * W + j)] = sg[j];
      partial[2 * (item * W + j) + 1] = sgx[j];
    }
  }
};

// Item r: means (N, 2) = (mean of g, mean of g xhat) from the lanes' sums in lane order.
struct LayerNormGradStatsBody {
  const double* partial;
  int64_t C;
  float* means;
  KILN_HD void operator()(int64_t r) const {
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = r * kRowLanes; j < (r + 1) * kRowLanes; ++j) sg += partial[2 * j], sgx += partial[2 * j + 1];
    means[2 * r] = float(sg / double(C));
    means[2 * r + 1] = float(sgx / double(C));
  }
};

// Item i = element i: dx = rstd (g - mean(g) - xhat mean(g xhat)); with accumulate, dx += that.
// dx may alias dy.
struct LayerNormGradApplyBody {
  FloatPtr x, dy, w, dx;
  const float* mean;
  const float* rstd;
  const float* means;  // (N, 2), LayerNormGradStatsBody's
  int64_t C;
  bool accumulate;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / C, c = i % C;
    const float s = rstd[r];
    const float d = s * (dy[i] * w[c] - means[2 * r] - (x[i] - mean[r]) * s * means[2 * r + 1]);
    dx.set(i, accumulate ? dx[i] + d : d);
  }
};

// LayerNormGradApplyBody over spans, as LayerNormApplySpanBody (mul_rn included). dx may
// alias dy.
template <typename T>
struct LayerNormGradApplySpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* x;
  const T* dy;
  const T* w;
  T* dx;
  const float* mean;
  const float* rstd;
  const float* means;  // (N, 2), LayerNormGradStatsBody's
  int64_t C;
  bool accumulate;
  KILN_HD void operator()(int64_t k) const {
    const QuotRem rc = divide(k * W, C);
    const int64_t r = rc.q;
    float v[W], d[W], wv[W], out[W] = {};
    load_packs<W>(x + k * W, v);
    load_packs<W>(dy + k * W, d);
    load_packs<W>(w + rc.r, wv);
    if (accumulate) load_packs<W>(dx + k * W, out);
    const float s = rstd[r], m = mean[r], g_mean = means[2 * r], gx_mean = means[2 * r + 1];
    for (int j = 0; j < W; ++j) {
      const float e = mul_rn(s, mul_rn(d[j], wv[j]) - g_mean - mul_rn((v[j] - m) * s, gx_mean));
      out[j] = accumulate ? out[j] + e : e;
    }
    store_packs<W>(dx + k * W, out);
  }
};

// Item = (chunk k, column c), item = k * C + c: partial[item] = (Σ dy xhat, Σ dy) in f32 over the
// rows [k R, (k + 1) R) of the chunk (R = kLayerNormGradRows), in row order.
struct LayerNormParamChunkBody {
  FloatPtr x, dy;
  const float* mean;
  const float* rstd;
  int64_t N, C;
  float* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const int64_t k = item / C, c = item % C;
    const int64_t r0 = k * kLayerNormGradRows, r1 = r0 + kLayerNormGradRows < N ? r0 + kLayerNormGradRows : N;
    float chunk_w = 0.0f, chunk_b = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
      const float g = dy[r * C + c];
      chunk_w += g * ((x[r * C + c] - mean[r]) * rstd[r]);
      chunk_b += g;
    }
    partial[2 * item] = chunk_w;
    partial[2 * item + 1] = chunk_b;
  }
};

// LayerNormParamChunkBody for W neighbouring columns per item (item = k (C / W) + q: columns
// qW .. qW + W - 1 of chunk k), each summed over the chunk's rows in row order as there: the same
// partials, the rows' elements read as spans.
template <typename T>
struct LayerNormParamChunkSpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* x;
  const T* dy;
  const float* mean;
  const float* rstd;
  int64_t N, C;
  float* partial;  // 2 per (chunk, column)
  KILN_HD void operator()(int64_t item) const {
    const QuotRem kq = divide(item, C / W);
    const int64_t c0 = kq.r * W, r0 = kq.q * kLayerNormGradRows;
    const int64_t r1 = r0 + kLayerNormGradRows < N ? r0 + kLayerNormGradRows : N;
    float chunk_w[W] = {}, chunk_b[W] = {};
    for (int64_t r = r0; r < r1; ++r) {
      float g[W], v[W];
      load_packs<W>(dy + r * C + c0, g);
      load_packs<W>(x + r * C + c0, v);
      const float m = mean[r], s = rstd[r];
      for (int j = 0; j < W; ++j) {
        chunk_w[j] += g[j] * ((v[j] - m) * s);
        chunk_b[j] += g[j];
      }
    }
    for (int j = 0; j < W; ++j) {
      partial[2 * (kq.q * C + c0 + j)] = chunk_w[j];
      partial[2 * (kq.q * C + c0 + j) + 1] = chunk_b[j];
    }
  }
};

// Item c = column c: dw[c] += Σ_k chunk sums and db[c] likewise, added in double in chunk order.
struct LayerNormParamSumBody {
  const float* partial;
  int64_t chunks, C;
  float* dw;
  float* db;
  KILN_HD void operator()(int64_t c) const {
    double acc_w = 0.0, acc_b = 0.0;
    for (int64_t k = 0; k < chunks; ++k) acc_w += partial[2 * (k * C + c)], acc_b += partial[2 * (k * C + c) + 1];
    dw[c] += float(acc_w);
    db[c] += float(acc_b);
  }
};

}  // namespace kiln::ops::cuda
