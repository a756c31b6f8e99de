// backend/cpu/cast.cc — fill and dtype conversion.
#include <cstring>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/master_halves.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {
constexpr int64_t kParallelMin = 1 << 15;

// Split master weights: w (f32) and its halves high (bf16) and low (u16), all of one size.
void check_halves(const char* op, const Tensor& w, const Tensor& high, const Tensor& low) {
  expect_dtype(op, "w", w, {DType::f32});
  expect_dtype(op, "high", high, {DType::bf16});
  expect_dtype(op, "low", low, {DType::u16});
  expect_same_numel(op, w, high);
  expect_same_numel(op, w, low);
}
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

void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low) {
  const OpScope scope = expect_cpu(ctx, "split_master", {&w, &high, &low});
  check_halves("split_master", w, high, low);
  const float* W = w.ptr<float>();
  auto* H = static_cast<uint16_t*>(high.data);
  auto* L = static_cast<uint16_t*>(low.data);
  const int64_t n = w.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) split_halves(W[i], H[i], L[i]);
}

void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w) {
  const OpScope scope = expect_cpu(ctx, "join_master", {&high, &low, &w});
  check_halves("join_master", w, high, low);
  const auto* H = static_cast<const uint16_t*>(high.data);
  const auto* L = static_cast<const uint16_t*>(low.data);
  float* W = w.ptr<float>();
  const int64_t n = w.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) W[i] = join_halves(H[i], L[i]);
}

}  // namespace kiln::ops::cpu
