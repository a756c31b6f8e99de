// backend/cuda/elementwise_bodies.h — the per-item work of the CUDA backend's own kernels, as
// __host__ __device__ functors: item i is an element, a Philox block or a row, as each says.
// backend/cuda/*.cu launches them over grid_for(items) (grid.h); tests/backend/
// cuda_bodies_test.cc runs them on the CPU over the same grid against a float64 reference.
// Arithmetic is f32, storage f32 / bf16 / f16 (hd_types.h).
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/core/philox.h"

namespace kiln::ops::cuda {

template <typename T>
struct FillBody {
  T* p;
  T value;
  KILN_HD void operator()(int64_t i) const { p[i] = value; }
};

template <typename S, typename D>
struct CastBody {
  const S* src;
  D* dst;
  KILN_HD void operator()(int64_t i) const { dst[i] = store<D>(load(src[i])); }
};

template <typename A, typename B, typename O>
struct AddBody {
  const A* a;
  const B* b;
  O* out;
  KILN_HD void operator()(int64_t i) const { out[i] = store<O>(load(a[i]) + load(b[i])); }
};

template <typename X, typename Y>
struct ScaleBody {
  const X* x;
  Y* y;
  float s;
  KILN_HD void operator()(int64_t i) const { y[i] = store<Y>(s * load(x[i])); }
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

template <typename X, typename Y>
struct GeluForwardBody {
  const X* x;
  Y* y;
  bool tanh_form;
  KILN_HD void operator()(int64_t i) const { y[i] = store<Y>(gelu(tanh_form, load(x[i]))); }
};

template <typename X, typename D, typename O>
struct GeluBackwardBody {
  const X* x;
  const D* dy;
  O* dx;
  bool tanh_form;
  KILN_HD void operator()(int64_t i) const {
    dx[i] = store<O>(load(dy[i]) * gelu_grad(tanh_form, load(x[i])));
  }
};

// ---- item i = element i; operands as FloatPtr (hd_types.h) ----

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

// max(v, 0) as std::max(v, 0.0f) computes it: NaN and -0 pass through, as on the CPU.
KILN_HD inline float relu(float v) { return v < 0.0f ? 0.0f : v; }

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

// Item k = one Philox block j = first + k % blocks of sample k / blocks: elements 4j .. 4j + 3
// of the whole sample, at counter (global sample << 32) | j — the CPU backend's mask, bit for
// bit. This tensor holds elements [element_offset, element_offset + per_sample) of each sample.
template <typename X, typename Y>
struct DropoutBody {
  const X* x;
  Y* y;
  RngStream rng;
  const int64_t* sample_offset;  // the micro-batch's first global sample, read when the kernel runs
  int64_t per_sample, element_offset, first, blocks;
  float p, scale;
  KILN_HD void operator()(int64_t k) const {
    const int64_t s = k / blocks, j = first + k % blocks;
    const auto bits = rng.block(((uint64_t(*sample_offset) + uint64_t(s)) << 32) | uint64_t(j));
    for (int64_t t = 0; t < 4; ++t) {
      const int64_t e = 4 * j + t - element_offset;  // in this tensor's part of the sample
      if (e < 0 || e >= per_sample) continue;
      const int64_t i = s * per_sample + e;
      y[i] = store<Y>(u32_to_unit_float(bits[t]) < p ? 0.0f : load(x[i]) * scale);
    }
  }
};

}  // namespace kiln::ops::cuda
