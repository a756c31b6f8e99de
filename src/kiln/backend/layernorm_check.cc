// backend/layernorm_check.cc — the argument checks of LayerNorm's ops (backend/checks.h), made once
// in the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// x (N, C) with C = w.numel(), b (C), mean and rstd (N) f32.
void check_shapes(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean,
                  const Tensor& rstd) {
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
}

// layernorm_forward, or add_layernorm_forward when `residual` is defined.
void check_forward(const char* op, const Tensor& x, const Tensor& residual, const Tensor& sum, const Tensor& w,
                   const Tensor& b, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  check_shapes(op, x, w, b, mean, rstd);
  expect_same_numel(op, x, y);
  KILN_CHECK(w.dtype == b.dtype, "op {}: weight {} and bias {}", op, dtype_name(w.dtype), dtype_name(b.dtype));
  expect_dtype(op, "x", x, kFloat);
  expect_dtype(op, "weight", w, kFloat);
  expect_dtype(op, "y", y, kFloat);
  if (residual.defined()) expect_like(op, x, {&residual, &sum});
}

}  // namespace

void check_args(check::layernorm_forward, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                Tensor& y, Tensor& mean, Tensor& rstd) {
  check_forward("layernorm_forward", x, Tensor{}, Tensor{}, w, b, y, mean, rstd);
}

void check_args(check::add_layernorm_forward, const Tensor& a, const Tensor& b, const Tensor& w,
                const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  check_forward("add_layernorm_forward", a, b, sum, w, bias, y, mean, rstd);
}

void check_args(check::layernorm_backward, const Tensor& dy, const Tensor& x, const Tensor& w,
                const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw, Tensor& db,
                bool accumulate_dx) {
  const char* op = "layernorm_backward";
  check_shapes(op, x, w, db, mean, rstd);
  expect_same_numel(op, x, dy);
  expect_same_numel(op, x, dx);
  expect_dtype(op, "dw", dw, {DType::f32});
  expect_dtype(op, "db", db, {DType::f32});
  KILN_CHECK(dw.numel() == w.numel(), "op layernorm_backward: dw {} for {} columns", shape_str(dw.shape),
             w.numel());
  expect_dtype(op, "x", x, kFloat);
  expect_dtype(op, "dy", dy, kFloat);
  expect_dtype(op, "weight", w, kFloat);
  expect_dtype(op, "dx", dx, kFloat);
}

}  // namespace kiln::ops
