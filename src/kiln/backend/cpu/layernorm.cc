// backend/cpu/layernorm.cc — LayerNorm over rows: any float storage, f32 statistics (two-pass
// variance), parameter gradients summed in double in row order.
#include <algorithm>
#include <cmath>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;

// Rows N of x (N, C) with C = w.numel(); checks the shapes the op's tensors must have.
int64_t check_shapes(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                     const Tensor& mean, const Tensor& rstd) {
  const int64_t C = w.numel();
  KILN_CHECK(x.rank() >= 1 && C > 0 && x.dim(-1) == C && b.numel() == C,
             "op {}: input {} with weight {} and bias {}", op, shape_str(x.shape),
             shape_str(w.shape), shape_str(b.shape));
  const int64_t N = x.numel() / C;
  KILN_CHECK(mean.numel() == N && rstd.numel() == N && mean.dtype == DType::f32 &&
                 rstd.dtype == DType::f32,
             "op {}: mean/rstd must be f32 ({}), got {} {} and {} {}", op, N,
             dtype_name(mean.dtype), shape_str(mean.shape), dtype_name(rstd.dtype),
             shape_str(rstd.shape));
  return N;
}

}  // namespace

void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const OpScope scope = expect_cpu(ctx, "layernorm_forward", {&x, &w, &b, &y, &mean, &rstd});
  const int64_t N = check_shapes("layernorm_forward", x, w, b, mean, rstd), C = w.numel();
  expect_same_numel("layernorm_forward", x, y);
  KILN_CHECK(w.dtype == b.dtype, "op layernorm_forward: weight {} and bias {}",
             dtype_name(w.dtype), dtype_name(b.dtype));
  float* mp = mean.ptr<float>();
  float* sp = rstd.ptr<float>();
  cpu::dispatch_float(x.dtype, "layernorm_forward", [&]<typename X>(X) {
    cpu::dispatch_float(y.dtype, "layernorm_forward", [&]<typename Y>(Y) {
      cpu::dispatch_float(w.dtype, "layernorm_forward", [&]<typename W>(W) {
        const W* wp = w.ptr<W>();
        const W* bp = b.ptr<W>();
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
        for (int64_t r = 0; r < N; ++r) {
          const X* xr = x.ptr<X>() + r * C;
          Y* yr = y.ptr<Y>() + r * C;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < C; ++c) sum += cpu::load(xr[c]);
          const float m = sum / float(C);
          float var = 0.0f;
#pragma omp simd reduction(+ : var)
          for (int64_t c = 0; c < C; ++c) {
            const float v = cpu::load(xr[c]) - m;
            var += v * v;
          }
          const float s = 1.0f / std::sqrt(var / float(C) + eps);
          // mean and rstd first: y may alias x.
          mp[r] = m;
          sp[r] = s;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c)
            yr[c] = cpu::store<Y>((cpu::load(xr[c]) - m) * s * cpu::load(wp[c]) + cpu::load(bp[c]));
        }
      });
    });
  });
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  const OpScope scope = expect_cpu(ctx, "layernorm_backward", {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db});
  const int64_t N = check_shapes("layernorm_backward", x, w, db, mean, rstd), C = w.numel();
  expect_same_numel("layernorm_backward", x, dy);
  expect_same_numel("layernorm_backward", x, dx);
  expect_dtype("layernorm_backward", "dw", dw, {DType::f32});
  expect_dtype("layernorm_backward", "db", db, {DType::f32});
  KILN_CHECK(dw.numel() == C, "op layernorm_backward: dw {} for {} columns", shape_str(dw.shape), C);
  const float* mp = mean.ptr<float>();
  const float* sp = rstd.ptr<float>();
  cpu::dispatch_float(x.dtype, "layernorm_backward", [&]<typename X>(X) {
    cpu::dispatch_float(dy.dtype, "layernorm_backward", [&]<typename D>(D) {
      cpu::dispatch_float(w.dtype, "layernorm_backward", [&]<typename W>(W) {
        const W* wp = w.ptr<W>();
        // dw, db first (dx may alias dy): column sums in row order per column block,
        // independent of the thread count.
        constexpr int64_t kBlock = 64;
        const int64_t blocks = (C + kBlock - 1) / kBlock;
        float* dwp = dw.ptr<float>();
        float* dbp = db.ptr<float>();
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const int64_t c0 = blk * kBlock, wd = std::min(kBlock, C - c0);
          double acc_w[kBlock] = {}, acc_b[kBlock] = {};
          for (int64_t r = 0; r < N; ++r) {
            const X* xr = x.ptr<X>() + r * C + c0;
            const D* dyr = dy.ptr<D>() + r * C + c0;
            const float m = mp[r], s = sp[r];
#pragma omp simd
            for (int64_t c = 0; c < wd; ++c) {
              const float g = cpu::load(dyr[c]);
              acc_w[c] += g * ((cpu::load(xr[c]) - m) * s);
              acc_b[c] += g;
            }
          }
          for (int64_t c = 0; c < wd; ++c) {
            dwp[c0 + c] += float(acc_w[c]);
            dbp[c0 + c] += float(acc_b[c]);
          }
        }
        // dx per row: rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
        cpu::dispatch_float(dx.dtype, "layernorm_backward", [&]<typename O>(O) {
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
          for (int64_t r = 0; r < N; ++r) {
            const X* xr = x.ptr<X>() + r * C;
            const D* dyr = dy.ptr<D>() + r * C;
            O* dxr = dx.ptr<O>() + r * C;
            const float m = mp[r], s = sp[r];
            float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
            for (int64_t c = 0; c < C; ++c) {
              const float g = cpu::load(dyr[c]) * cpu::load(wp[c]);
              sum_g += g;
              sum_gx += g * (cpu::load(xr[c]) - m) * s;
            }
            const float mg = sum_g / float(C), mgx = sum_gx / float(C);
            if (accumulate_dx) {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c)
                dxr[c] = cpu::store<O>(cpu::load(dxr[c]) +
                                       s * (cpu::load(dyr[c]) * cpu::load(wp[c]) - mg -
                                            (cpu::load(xr[c]) - m) * s * mgx));
            } else {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c)
                dxr[c] = cpu::store<O>(s * (cpu::load(dyr[c]) * cpu::load(wp[c]) - mg -
                                            (cpu::load(xr[c]) - m) * s * mgx));
            }
          }
        });
      });
    });
  });
}

}  // namespace kiln::ops::cpu
