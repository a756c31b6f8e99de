// backend/cpu/relu.cc — ReLU, the fused residual add + ReLU and the residual gradient join,
// written once for f32 / bf16 / f16 storage (arithmetic in f32).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {
constexpr int64_t kParallelMin = 16384;

using cpu::load;
using cpu::store;

// dx = dy + dy2 where y > 0, else +0.
void relu_backward_of_sum(const Tensor& y, const Tensor& dy, const Tensor& dy2, Tensor& dx) {
  const int64_t n = y.numel();
  cpu::dispatch_float(y.dtype, "relu_backward", [&]<typename T>(T) {
    const T *yp = y.ptr<T>(), *ap = dy.ptr<T>(), *bp = dy2.ptr<T>();
    T* dxp = dx.ptr<T>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float sum = load(ap[i]) + load(bp[i]);  // unconditionally, so that the loop vectorises
      dxp[i] = store<T>(load(yp[i]) > 0.0f ? sum : 0.0f);
    }
  });
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "relu_forward", {&x, &y});
  const int64_t n = x.numel();
  cpu::dispatch_float(x.dtype, "relu_forward", [&]<typename T>(T) {
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) yp[i] = store<T>(std::max(load(xp[i]), 0.0f));
  });
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  const OpScope scope = expect_cpu(ctx, "relu_backward", {&y, &dy, &dx, &dy2});
  if (dy2.defined()) return relu_backward_of_sum(y, dy, dy2, dx);
  const int64_t n = y.numel();
  cpu::dispatch_float(y.dtype, "relu_backward", [&]<typename T>(T) {
    // dy's stored bits where y > 0, else +0 (all bits clear in every dtype): no conversions.
    // y > 0 on the bits: sign clear, not zero, at most +inf (NaN is not > 0).
    using Bits = std::conditional_t<sizeof(T) == 4, int32_t, int16_t>;
    constexpr Bits inf = std::is_same_v<T, float> ? Bits(0x7f800000) : std::is_same_v<T, bf16_t> ? Bits(0x7f80) : Bits(0x7c00);
    const Bits* yp = static_cast<const Bits*>(y.data);
    const Bits* dyp = static_cast<const Bits*>(dy.data);
    Bits* dxp = static_cast<Bits*>(dx.data);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) dxp[i] = yp[i] > 0 && yp[i] <= inf ? dyp[i] : Bits(0);
  });
}

void residual_add(Context& ctx, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "residual_add", {&x, &y});
  const int64_t n = x.numel();
  cpu::dispatch_float(x.dtype, "residual_add", [&]<typename T>(T) {
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) yp[i] = store<T>(load(yp[i]) + load(xp[i]));
  });
}

}  // namespace kiln::ops::cpu
