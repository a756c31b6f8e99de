// backend/cpu/elementwise.cc — elementwise ops, bias add / grad, activations, dropout; written
// once for f32 / bf16 / f16 storage with f32 arithmetic (backend/cpu/typed.h).
// GCC 12's false warnings on inlined AVX-512 intrinsics (backend/cpu/philox_lanes.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <cmath>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/philox_lanes.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/vec_math.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;  // below this an OpenMP region costs more than it saves
constexpr int64_t kColumnBlock = 64;    // columns per task in deterministic column sums

// Calls fn(A{}, B{}, C{}) with the storage types of three tensors.
template <typename Fn>
void dispatch3(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, Fn&& fn) {
  cpu::dispatch_float(a.dtype, op, [&]<typename A>(A) {
    cpu::dispatch_float(b.dtype, op, [&]<typename B>(B) {
      cpu::dispatch_float(c.dtype, op, [&]<typename C>(C) { fn(A{}, B{}, C{}); });
    });
  });
}

}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  const OpScope scope = expect_cpu(ctx, "add", {&a, &b, &out});
  const int64_t n = out.numel();
  dispatch3("add", a, b, out, [&]<typename A, typename B, typename O>(A, B, O) {
    const A* x = a.ptr<A>();
    const B* y = b.ptr<B>();
    O* o = out.ptr<O>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) o[i] = cpu::store<O>(cpu::load(x[i]) + cpu::load(y[i]));
  });
}

void scale(Context& ctx, const Tensor& x, float s, Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "scale", {&x, &y});
  const int64_t n = y.numel();
  cpu::dispatch_float(x.dtype, "scale", [&]<typename X>(X) {
    cpu::dispatch_float(y.dtype, "scale", [&]<typename Y>(Y) {
      const X* in = x.ptr<X>();
      Y* out = y.ptr<Y>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) out[i] = cpu::store<Y>(s * cpu::load(in[i]));
    });
  });
}

void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  const OpScope scope = expect_cpu(ctx, "bias_add", {&y, &bias});
  const int64_t C = bias.numel(), N = y.numel() / C;
  cpu::dispatch_float(y.dtype, "bias_add", [&]<typename Y>(Y) {
    cpu::dispatch_float(bias.dtype, "bias_add", [&]<typename Bt>(Bt) {
      Y* out = y.ptr<Y>();
      const Bt* b = bias.ptr<Bt>();
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
      for (int64_t r = 0; r < N; ++r) {
        Y* row = out + r * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) row[c] = cpu::store<Y>(cpu::load(row[c]) + cpu::load(b[c]));
      }
    });
  });
}

// Each task owns a block of columns and walks all rows in order, so the sum does not depend
// on the thread count.
void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  const OpScope scope = expect_cpu(ctx, "bias_grad", {&dy, &db});
  const int64_t C = db.numel(), N = dy.numel() / C;
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  float* out = db.ptr<float>();
  cpu::dispatch_float(dy.dtype, "bias_grad", [&]<typename T>(T) {
    const T* g = dy.ptr<T>();
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * kColumnBlock, w = std::min(kColumnBlock, C - c0);
      double total[kColumnBlock] = {};
      for (int64_t r0 = 0; r0 < N; r0 += kBiasGradRows) {
        double acc[kColumnBlock] = {};
        for (int64_t r = r0; r < std::min(N, r0 + kBiasGradRows); ++r) {
          const T* row = g + r * C + c0;
#pragma omp simd
          for (int64_t c = 0; c < w; ++c) acc[c] += cpu::load(row[c]);
        }
        for (int64_t c = 0; c < w; ++c) total[c] += acc[c];
      }
      for (int64_t c = 0; c < w; ++c) out[c0 + c] += float(total[c]);
    }
  });
}

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

// y[i] = f(x[i]) over two tensors of one numel and any float dtypes.
template <typename F>
void unary(Context& ctx, const char* op, const Tensor& x, Tensor& y, F f) {
  const OpScope scope = expect_cpu(ctx, op, {&x, &y});
  const int64_t n = y.numel();
  cpu::dispatch_float(x.dtype, op, [&]<typename X>(X) {
    cpu::dispatch_float(y.dtype, op, [&]<typename Y>(Y) {
      const X* in = x.ptr<X>();
      Y* out = y.ptr<Y>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) out[i] = cpu::store<Y>(f(cpu::load(in[i])));
    });
  });
}

// dx[i] = f(s[i], dy[i]) where s is the saved forward tensor.
template <typename F>
void binary(Context& ctx, const char* op, const Tensor& s, const Tensor& dy, Tensor& dx, F f) {
  const OpScope scope = expect_cpu(ctx, op, {&s, &dy, &dx});
  const int64_t n = dx.numel();
  dispatch3(op, s, dy, dx, [&]<typename S, typename D, typename O>(S, D, O) {
    const S* a = s.ptr<S>();
    const D* g = dy.ptr<D>();
    O* o = dx.ptr<O>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) o[i] = cpu::store<O>(f(cpu::load(a[i]), cpu::load(g[i])));
  });
}

}  // namespace

void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y) {
  if (kind == GeluKind::erf) {
    unary(ctx, "gelu_forward", x, y,
          [](float v) { return 0.5f * v * (1.0f + vec::erf(v * kInvSqrt2)); });
  } else {
    unary(ctx, "gelu_forward", x, y, [](float v) {
      return 0.5f * v * (1.0f + vec::tanh_abs(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
    });
  }
}

void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (kind == GeluKind::erf) {
    binary(ctx, "gelu_backward", x, dy, dx, [](float v, float g) {
      const float u = v * kInvSqrt2, a = u < 0.0f ? -u : u;
      const float gauss = vec::exp(-a * a);  // exp(-v²/2): erf's and the density's
      const float cdf = 0.5f * (1.0f + vec::erf_given_exp(u, gauss));
      const float pdf = kInvSqrt2Pi * gauss;
      return g * (cdf + v * pdf);
    });
  } else {
    binary(ctx, "gelu_backward", x, dy, dx, [](float v, float g) {
      const float t = vec::tanh_abs(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
      return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    });
  }
}

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  unary(ctx, "tanh_forward", x, y, [](float v) { return std::tanh(v); });
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  binary(ctx, "tanh_backward", y, dy, dx, [](float v, float g) { return g * (1.0f - v * v); });
}

namespace {

// out = in * (uniform(sample, i) < p ? 0 : 1/(1-p)); one Philox block serves 4 elements of a
// sample, at counter (global sample << 32) | (i / 4), i counted from the whole sample's start
// (element_offset elements before this slice).
void apply_dropout_mask(Context& ctx, const char* op, const Tensor& in, const DropoutMask& m, Tensor& out) {
  const OpScope scope = expect_cpu(ctx, op, {&in, &out, &m.sample_offset});
  const int64_t n = in.numel(), per = n / m.samples, samples = m.samples;
  const uint64_t first_sample = uint64_t(m.sample_offset.ptr<int64_t>()[0]);
  const int64_t element_offset = m.element_offset, first = element_offset / 4,
                blocks = (element_offset + per + 3) / 4 - first;
  const RngStream& rng = m.rng;
  const float p = m.p;
  const float scale = 1.0f / (1.0f - p);
  cpu::dispatch_float(in.dtype, op, [&]<typename X>(X) {
    cpu::dispatch_float(out.dtype, op, [&]<typename Y>(Y) {
      const X* x = in.ptr<X>();
      Y* y = out.ptr<Y>();
      const int64_t batches = (blocks + kPhiloxLanes - 1) / kPhiloxLanes;
#pragma omp parallel for collapse(2) schedule(static) if (n > kParallelMin / 4)
      for (int64_t s = 0; s < samples; ++s)
        for (int64_t b = 0; b < batches; ++b) {
          const int64_t j0 = first + b * kPhiloxLanes;
          float keep[4 * kPhiloxLanes];  // element t of the batch: element base + t of the slice
          dropout_keep_lanes(rng.seed, rng.stream, uint32_t(first_sample + uint64_t(s)), uint32_t(j0), p, keep);
          const int64_t base = 4 * j0 - element_offset;
          const int64_t t0 = std::max<int64_t>(0, -base), t1 = std::min<int64_t>(4 * kPhiloxLanes, per - base);
#pragma omp simd
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t i = s * per + base + t;
            const float kept = cpu::load(x[i]) * scale;
            y[i] = cpu::store<Y>(keep[t] != 0.0f ? kept : 0.0f);
          }
        }
    });
  });
}

}  // namespace

void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y) {
  apply_dropout_mask(ctx, "dropout_forward", x, mask, y);
}

void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx) {
  apply_dropout_mask(ctx, "dropout_backward", dy, mask, dx);
}

}  // namespace kiln::ops::cpu
