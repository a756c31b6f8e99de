// backend/cpu/cast.cc — fill and dtype conversion.
#include <cstring>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void fill(Context& ctx, Tensor& t, float value) {
  const OpScope scope = expect_cpu(ctx, "fill", {&t});
  const int64_t n = t.numel();
  if (value == 0.0f) {
    std::memset(t.data, 0, t.nbytes());
    return;
  }
  if (t.dtype == DType::i32) {
    int32_t* p = t.ptr<int32_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = int32_t(value);
    return;
  }
  cpu::dispatch_float(t.dtype, "fill", [&]<typename T>(T) {
    const T v = cpu::store<T>(value);
    T* p = t.ptr<T>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
  KILN_CHECK(src.dtype == dst.dtype, "op copy: dtypes {} and {} differ", dtype_name(src.dtype),
             dtype_name(dst.dtype));
  expect_same_numel("copy", src, dst);
  KILN_CHECK(src.device.cpu_kernels() && dst.device.cpu_kernels(),
             "op copy: no backend for {} -> {} is compiled into this kiln", src.device.str(),
             dst.device.str());
  if (src.data != dst.data) std::memcpy(dst.data, src.data, src.nbytes());
}

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  const OpScope scope = expect_cpu(ctx, "cast", {&src, &dst});
  expect_same_numel("cast", src, dst);
  const int64_t n = src.numel();
  if (src.dtype == dst.dtype) {
    if (src.data != dst.data) std::memcpy(dst.data, src.data, src.nbytes());
    return;
  }
  cpu::dispatch_float(src.dtype, "cast", [&]<typename S>(S) {
    cpu::dispatch_float(dst.dtype, "cast", [&]<typename D>(D) {
      const S* s = src.ptr<S>();
      D* d = dst.ptr<D>();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) d[i] = cpu::store<D>(cpu::load(s[i]));
    });
  });
}

}  // namespace kiln::ops::cpu
