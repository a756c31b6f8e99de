// backend/cuda/elementwise_bodies.h — the per-item work of the CUDA backend's own kernels, as
// __host__ __device__ functors: item i is an element, a span, a Philox block or a row, as each says.
// backend/cuda/*.cu launches them over grid_for(items) (grid.h); tests/backend/
// cuda_bodies_test.cc runs them on the CPU over the same grid against a float64 reference.
// Arithmetic is f32, storage f32 / bf16 / f16 (hd_types.h).
//
// The elementwise ops are bandwidth-bound: a span body (vec_access.h) takes W = 16 bytes of the
// narrowest operand per item (8 bf16 / f16, 4 f32), every operand read and written as whole
// 16-byte packs. HBM bytes per element in bf16 (f32: twice), and the time for BERT-large's (8192,
// 4096) GELU activation (33.5M elements) at the 70% target (H100 3.35 TB/s / H200 4.8 TB/s):
//   cast f32 -> bf16 6 B; add, residual_add, gelu_backward, tanh_backward 6 B: ~86 / ~60 us
//   scale, gelu_forward, tanh_forward, relu_forward, bias_add, dropout 4 B: ~57 / ~40 us
//   relu_backward 6 B (8 B with a join's second gradient)
// The arithmetic must fit beside: an H100 issues ~10 f32 instructions per HBM byte (132 x 128
// lanes x 1.98 GHz / 3.35 TB/s), an H200 ~7, so ~40 / ~28 per bf16 element of a 4 B op. GELU's
// erff / tanhf (~20-30) fits on the H100 and is at the edge on the H200; dropout's
// Philox4x32-10 (~25 integer instructions per element, half of them multiplies) likely does not
// on the H200, and is the one op of this file that may miss the target there (to measure).
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/vec_access.h"
#include "kiln/core/philox.h"

namespace kiln::ops::cuda {

template <typename T>
struct FillBody {
  T* p;
  T value;
  KILN_HD void operator()(int64_t i) const { p[i] = value; }
};

// Item k = span k (vec_access.h) of n elements, for every span body below; `aligned` is
// packs_aligned() of its operands, n the elements of the output.
// A span body of one operand: y = fn(x), element by element in f32.
template <typename X, typename Y, typename Fn>
struct MapSpanBody {
  static constexpr int W = kSpanWidth<X, Y>;
  const X* x;
  Y* y;
  int64_t n;
  bool aligned;
  Fn fn{};
  KILN_HD void operator()(int64_t k) const {
    const Span s = span_of(k, W, n, aligned);
    float v[W];
    load_span(x, s, v);
    for (int j = 0; j < W; ++j) v[j] = fn(v[j]);
    store_span(y, s, v);
  }
};

// Of two operands: out = fn(a, b).
template <typename A, typename B, typename O, typename Fn>
struct ZipSpanBody {
  static constexpr int W = kSpanWidth<A, B, O>;
  const A* a;
  const B* b;
  O* out;
  int64_t n;
  bool aligned;
  Fn fn{};
  KILN_HD void operator()(int64_t k) const {
    const Span s = span_of(k, W, n, aligned);
    float u[W], v[W];
    load_span(a, s, u);
    load_span(b, s, v);
    for (int j = 0; j < W; ++j) u[j] = fn(u[j], v[j]);
    store_span(out, s, u);
  }
};

// GELU and its derivative, erf (BERT) or tanh (Megatron) form.
KILN_HD inline float gelu(bool tanh_form, float v) {
  if (!tanh_form) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
}
KILN_HD inline float gelu_grad(bool tanh_form, float v) {
  if (!tanh_form) {
    const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    return cdf + v * 0.39894228040143268f * expf(-0.5f * v * v);
  }
  const float t = tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v));
  const float du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

// max(v, 0) as std::max(v, 0.0f) computes it: NaN and -0 pass through, as on the CPU.
KILN_HD inline float relu(float v) { return v < 0.0f ? 0.0f : v; }

// The element functions of the span bodies, and the bodies they make.
struct Identity {
  KILN_HD float operator()(float v) const { return v; }
};
struct Scaled {
  float s;
  KILN_HD float operator()(float v) const { return s * v; }
};
struct Gelu {
  bool tanh_form;
  KILN_HD float operator()(float v) const { return gelu(tanh_form, v); }
};
struct Tanh {
  KILN_HD float operator()(float v) const { return tanhf(v); }
};
struct Relu {
  KILN_HD float operator()(float v) const { return relu(v); }
};
struct Sum {
  KILN_HD float operator()(float a, float b) const { return a + b; }
};
// dx from the forward input x and dy.
struct GeluGrad {
  bool tanh_form;
  KILN_HD float operator()(float x, float dy) const { return dy * gelu_grad(tanh_form, x); }
};
// dx = dy (1 - y^2) from the forward output y.
struct TanhGrad {
  KILN_HD float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

template <typename S, typename D> using CastBody = MapSpanBody<S, D, Identity>;
template <typename X, typename Y> using ScaleBody = MapSpanBody<X, Y, Scaled>;
template <typename X, typename Y> using GeluForwardSpanBody = MapSpanBody<X, Y, Gelu>;
template <typename T> using TanhForwardSpanBody = MapSpanBody<T, T, Tanh>;
template <typename T> using ReluForwardSpanBody = MapSpanBody<T, T, Relu>;
template <typename A, typename B, typename O> using AddBody = ZipSpanBody<A, B, O, Sum>;
template <typename X, typename D, typename O> using GeluBackwardBody = ZipSpanBody<X, D, O, GeluGrad>;
template <typename T> using TanhBackwardSpanBody = ZipSpanBody<T, T, T, TanhGrad>;

// dx = dy (+ dy2 where not null) where y > 0, else 0.
template <typename T>
struct ReluBackwardSpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* y;
  const T* dy;
  T* dx;
  const T* dy2;
  int64_t n;
  bool aligned;
  KILN_HD void operator()(int64_t k) const {
    const Span s = span_of(k, W, n, aligned);
    float v[W], g[W];
    load_span(y, s, v);
    load_span(dy, s, g);
    if (dy2) {
      float g2[W];
      load_span(dy2, s, g2);
      for (int j = 0; j < W; ++j) g[j] += g2[j];
    }
    for (int j = 0; j < W; ++j) g[j] = v[j] > 0.0f ? g[j] : 0.0f;
    store_span(dx, s, g);
  }
};

// y (N, C) += bias (C) on every row. Packs need C a multiple of W (then a span lies in one row,
// its columns a span of the bias): the host folds that into `aligned`. Otherwise element by
// element, each element's column its own.
template <typename Y, typename Bias>
struct BiasAddSpanBody {
  static constexpr int W = kSpanWidth<Y, Bias>;
  Y* y;
  const Bias* bias;
  int64_t C, n;
  bool aligned;
  KILN_HD void operator()(int64_t k) const {
    const Span s = span_of(k, W, n, aligned);
    float u[W], b[W];
    load_span(y, s, u);
    if (s.whole) {
      load_packs<W>(bias + divide(s.first, C).r, b);
    } else {
      for (int j = 0; j < s.count; ++j) b[j] = load(bias[(s.first + j) % C]);
    }
    for (int j = 0; j < s.count; ++j) u[j] += b[j];
    store_span(y, s, u);
  }
};

// ---- item i = element i; operands as FloatPtr (hd_types.h): the dtype combinations the span
// bodies above are not instantiated for ----

struct TanhForwardBody {
  FloatPtr x, y;
  KILN_HD void operator()(int64_t i) const { y.set(i, tanhf(x[i])); }
};

// dx = dy (1 - y^2) from the forward output y.
struct TanhBackwardBody {
  FloatPtr y, dy, dx;
  KILN_HD void operator()(int64_t i) const {
    const float v = y[i];
    dx.set(i, dy[i] * (1.0f - v * v));
  }
};

struct ReluForwardBody {
  FloatPtr x, y;
  KILN_HD void operator()(int64_t i) const { y.set(i, relu(x[i])); }
};

struct ReluBackwardBody {
  FloatPtr y, dy, dx, dy2;  // dy2: added to dy where not null
  KILN_HD void operator()(int64_t i) const {
    float g = dy[i];
    if (dy2.p) g += dy2[i];
    dx.set(i, y[i] > 0.0f ? g : 0.0f);
  }
};

// y += x (residual_add).
struct AccumulateBody {
  FloatPtr x, y;
  KILN_HD void operator()(int64_t i) const { y.set(i, y[i] + x[i]); }
};

// y (N, C) += bias (C) on every row.
struct BiasAddBody {
  FloatPtr y, bias;
  int64_t C;
  KILN_HD void operator()(int64_t i) const { y.set(i, y[i] + bias[i % C]); }
};

// Item k = kBlocks (W / 4) neighbouring Philox blocks of a sample, j = first + (k % groups)
// kBlocks + b of sample k / groups (groups = ceil(blocks / kBlocks)): elements 4j .. 4j + 3 of
// the whole sample, at counter (global sample << 32) | j — the CPU backend's mask, bit for bit.
// This tensor holds elements [element_offset, element_offset + per_sample) of each sample.
// `aligned`: the operands' packs_aligned and per_sample and element_offset multiples of W, so that
// an item's W elements are one span of whole packs in each operand.
template <typename X, typename Y>
struct DropoutBody {
  static constexpr int W = kSpanWidth<X, Y>, kBlocks = W / 4;
  const X* x;
  Y* y;
  RngStream rng;
  const int64_t* sample_offset;  // the micro-batch's first global sample, read when the kernel runs
  int64_t per_sample, element_offset, first, blocks, groups;
  float p, scale;
  bool aligned;
  KILN_HD void operator()(int64_t k) const {
    const QuotRem sg = divide(k, groups);
    const int64_t s = sg.q, b0 = sg.r * kBlocks;
    const uint64_t sample = (uint64_t(*sample_offset) + uint64_t(s)) << 32;
    bool drop[W] = {};
    for (int b = 0; b < kBlocks; ++b) {
      if (b0 + b >= blocks) break;
      const auto bits = rng.block(sample | uint64_t(first + b0 + b));
      for (int t = 0; t < 4; ++t) drop[4 * b + t] = u32_to_unit_float(bits[t]) < p;
    }
    const int64_t e0 = 4 * (first + b0) - element_offset;  // in this tensor's part of the sample
    if (aligned) {
      float v[W];
      load_packs<W>(x + s * per_sample + e0, v);
      for (int j = 0; j < W; ++j) v[j] = drop[j] ? 0.0f : v[j] * scale;
      return store_packs<W>(y + s * per_sample + e0, v);
    }
    for (int j = 0; j < 4 * kBlocks && b0 + j / 4 < blocks; ++j) {
      const int64_t e = e0 + j;
      if (e < 0 || e >= per_sample) continue;
      const int64_t i = s * per_sample + e;
      y[i] = store<Y>(drop[j] ? 0.0f : load(x[i]) * scale);
    }
  }
};

}  // namespace kiln::ops::cuda
