// backend/cpu/layernorm.cc — LayerNorm over rows: any float storage, f32 statistics (two-pass
// variance), parameter gradients in one pass with dx (f32 sums per chunk of rows, double across).
#include <algorithm>
#include <cmath>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;


// One chunk of rows, each read once: dx = rstd (g - mean(g) - x̂ mean(g x̂)) per row, with
// g = dy w and x̂ = (x - mean) rstd, and the chunk's column sums of dy·x̂ and dy into partial
// (2, C) (backend.h's order, so the same at any thread count). dx may alias dy: a row's dy is
// read whole before its dx is written.
template <typename X, typename D, typename W, typename O>
struct BackwardRows {
  const X* x;
  const D* dy;
  const W* w;
  const float *mean, *rstd;
  O* dx;
  int64_t C;
  bool accumulate_dx;

  void operator()(int64_t r0, int64_t r1, float* partial) const {
    float* pw = partial;
    float* pb = partial + C;
    std::fill(partial, partial + 2 * C, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {
      const X* xr = x + r * C;
      const D* dyr = dy + r * C;
      const float m = mean[r], s = rstd[r];
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t c = 0; c < C; ++c) {
        const float d = cpu::load(dyr[c]), xh = (cpu::load(xr[c]) - m) * s;
        pw[c] += d * xh;
        pb[c] += d;
        const float g = d * cpu::load(w[c]);
        sum_g += g;
        sum_gx += g * xh;
      }
      const float mg = sum_g / float(C), mgx = sum_gx / float(C);
      O* dxr = dx + r * C;
      if (accumulate_dx) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          dxr[c] = cpu::store<O>(cpu::load(dxr[c]) + s * (cpu::load(dyr[c]) * cpu::load(w[c]) - mg -
                                                          (cpu::load(xr[c]) - m) * s * mgx));
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          dxr[c] = cpu::store<O>(s * (cpu::load(dyr[c]) * cpu::load(w[c]) - mg - (cpu::load(xr[c]) - m) * s * mgx));
      }
    }
  }
};

}  // namespace

namespace {

// Rows of y = LayerNorm(x) with mean and rstd; with `residual`, x's row is first replaced by
// sum = x + residual rounded to X (written to `sum`, which the statistics then read).
template <typename X, typename Y, typename W>
void forward_rows(const X* x, const X* residual, X* sum, const W* w, const W* b, int64_t N, int64_t C,
                  float eps, Y* y, float* mean, float* rstd) {
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
  for (int64_t r = 0; r < N; ++r) {
    const X* xr = x + r * C;
    if (residual) {
      const X* rr = residual + r * C;
      X* sr = sum + r * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) sr[c] = cpu::store<X>(cpu::load(xr[c]) + cpu::load(rr[c]));
      xr = sr;
    }
    Y* yr = y + r * C;
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t c = 0; c < C; ++c) total += cpu::load(xr[c]);
    const float m = total / float(C);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) {
      const float v = cpu::load(xr[c]) - m;
      var += v * v;
    }
    const float s = 1.0f / std::sqrt(var / float(C) + eps);
    // mean and rstd first: y may alias x.
    mean[r] = m;
    rstd[r] = s;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      yr[c] = cpu::store<Y>((cpu::load(xr[c]) - m) * s * cpu::load(w[c]) + cpu::load(b[c]));
  }
}

// layernorm_forward, or add_layernorm_forward when `residual` is defined.
void forward(const char* op, Context& ctx, const Tensor& x, const Tensor& residual, Tensor& sum, const Tensor& w,
             const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const OpScope scope = expect_cpu(ctx, op, {&x, &residual, &sum, &w, &b, &y, &mean, &rstd});
  const int64_t C = w.numel(), N = x.numel() / C;
  const bool join = residual.defined();
  cpu::dispatch_float(x.dtype, op, [&]<typename X>(X) {
    cpu::dispatch_float(y.dtype, op, [&]<typename Y>(Y) {
      cpu::dispatch_float(w.dtype, op, [&]<typename W>(W) {
        forward_rows(x.ptr<X>(), join ? residual.ptr<X>() : nullptr, join ? sum.ptr<X>() : nullptr, w.ptr<W>(),
                     b.ptr<W>(), N, C, eps, y.ptr<Y>(), mean.ptr<float>(), rstd.ptr<float>());
      });
    });
  });
}

}  // namespace

void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  Tensor no_sum;
  forward("layernorm_forward", ctx, x, Tensor{}, no_sum, w, b, eps, y, mean, rstd);
}

void add_layernorm_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& w,
                           const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  forward("add_layernorm_forward", ctx, a, b, sum, w, bias, eps, y, mean, rstd);
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  const OpScope scope = expect_cpu(ctx, "layernorm_backward", {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db});
  const int64_t C = w.numel(), N = x.numel() / C;
  const int64_t chunks = (N + kLayerNormGradRows - 1) / kLayerNormGradRows;
  Tensor partial_t = ctx.scratch_tensor({chunks, 2, C}, DType::f32);  // per chunk: Σ dy·x̂, Σ dy
  float* partial = partial_t.ptr<float>();
  cpu::dispatch_float(x.dtype, "layernorm_backward", [&]<typename X>(X) {
    cpu::dispatch_float(dy.dtype, "layernorm_backward", [&]<typename D>(D) {
      cpu::dispatch_float(w.dtype, "layernorm_backward", [&]<typename W>(W) {
        cpu::dispatch_float(dx.dtype, "layernorm_backward", [&]<typename O>(O) {
          const BackwardRows<X, D, W, O> rows{x.ptr<X>(), dy.ptr<D>(), w.ptr<W>(), mean.ptr<float>(),
                                              rstd.ptr<float>(), dx.ptr<O>(), C, accumulate_dx};
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
          for (int64_t k = 0; k < chunks; ++k)
            rows(k * kLayerNormGradRows, std::min(N, (k + 1) * kLayerNormGradRows), partial + k * 2 * C);
        });
      });
    });
  });
  float* dwp = dw.ptr<float>();
  float* dbp = db.ptr<float>();
#pragma omp parallel for schedule(static) if (chunks * C > kParallelMin)
  for (int64_t c = 0; c < C; ++c) {
    double sw = 0.0, sb = 0.0;
    for (int64_t k = 0; k < chunks; ++k) sw += partial[k * 2 * C + c], sb += partial[(k * 2 + 1) * C + c];
    dwp[c] += float(sw);
    dbp[c] += float(sb);
  }
}

}  // namespace kiln::ops::cpu
