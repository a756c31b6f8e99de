// backend/pool_check.cc — the argument checks of max pooling and global average pooling
// (backend/checks.h), made once in the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// x is the pool's input (N, H, W, C) and y its output (N, P, Q, C).
void check_pool(const char* op, const PoolShape& s, const Tensor& x, const char* x_name, const Tensor& y,
                const char* y_name) {
  KILN_CHECK(s.P() > 0 && s.Q() > 0, "op {}: input {}x{} is too small for window {}x{}", op, s.H,
             s.W, s.R, s.S);
  const Shape xs{s.N, s.H, s.W, s.C}, ys{s.N, s.P(), s.Q(), s.C};
  KILN_CHECK(x.shape == xs, "op {}: {} is {}, the pool takes {}", op, x_name, shape_str(x.shape),
             shape_str(xs));
  KILN_CHECK(y.shape == ys, "op {}: {} is {}, the pool makes {}", op, y_name, shape_str(y.shape),
             shape_str(ys));
}

// x (N, H, W, C) and y (N, C) of the global average pool (or their gradients), float dtypes.
void check_avgpool(const char* op, const Tensor& x, const char* x_name, const Tensor& y, const char* y_name) {
  KILN_CHECK(x.rank() == 4 && y.rank() == 2 && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(3),
             "op {}: {} and {} are not (N, H, W, C) and (N, C)", op, shape_str(x.shape),
             shape_str(y.shape));
  expect_dtype(op, x_name, x, kFloat);
  expect_dtype(op, y_name, y, kFloat);
}

}  // namespace

void check_args(check::maxpool_forward, const PoolShape& s, const Tensor& x, Tensor& y, Tensor& argmax) {
  const char* op = "maxpool_forward";
  check_pool(op, s, x, "input", y, "output");
  KILN_CHECK(x.dtype == y.dtype, "op {}: dtypes {} and {} differ", op, dtype_name(x.dtype), dtype_name(y.dtype));
  expect_dtype(op, "x", x, kFloat);
  expect_dtype(op, "argmax", argmax, {DType::i32});
  KILN_CHECK(argmax.shape == y.shape, "op {}: argmax {} does not match output {}", op, shape_str(argmax.shape),
             shape_str(y.shape));
}

void check_args(check::maxpool_backward, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                Tensor& dx) {
  const char* op = "maxpool_backward";
  check_pool(op, s, dx, "input gradient", dy, "output gradient");
  KILN_CHECK(dx.dtype == dy.dtype, "op {}: dtypes {} and {} differ", op, dtype_name(dy.dtype), dtype_name(dx.dtype));
  expect_dtype(op, "dy", dy, kFloat);
  expect_dtype(op, "argmax", argmax, {DType::i32});
  KILN_CHECK(argmax.shape == dy.shape, "op {}: argmax {} does not match gradient {}", op,
             shape_str(argmax.shape), shape_str(dy.shape));
}

void check_args(check::global_avgpool_forward, const Tensor& x, Tensor& y) {
  check_avgpool("global_avgpool_forward", x, "x", y, "y");
}

void check_args(check::global_avgpool_backward, const Tensor& dy, Tensor& dx) {
  check_avgpool("global_avgpool_backward", dx, "dx", dy, "dy");
}

}  // namespace kiln::ops
