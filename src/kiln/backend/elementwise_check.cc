// backend/elementwise_check.cc — the argument checks of fill, cast, the elementwise ops and ReLU
// (backend/checks.h), made once in the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// y (N, C) for a bias of C = bias.numel().
void expect_rows_of(const char* op, const Tensor& y, const Tensor& bias) {
  const int64_t C = bias.numel();
  KILN_CHECK(y.rank() >= 1 && C > 0 && y.dim(-1) == C, "op {}: {} does not end in {} columns",
             op, shape_str(y.shape), C);
}

// out = f(in, ...): one element count, float dtypes.
void expect_float_like_numel(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ins,
                             const char* out_name, const Tensor& out) {
  for (const auto& [name, t] : ins) expect_same_numel(op, *t, out);
  for (const auto& [name, t] : ins) expect_dtype(op, name, *t, kFloat);
  expect_dtype(op, out_name, out, kFloat);
}

void check_dropout(const char* op, const Tensor& x, const DropoutMask& mask, const Tensor& y) {
  expect_float_like_numel(op, {{"input", &x}}, "output", y);
  expect_dropout_mask(op, mask, x.numel());
}

}  // namespace

// Zero fills any dtype (f64 sums, i64 totals).
void check_args(check::fill, Tensor& t, float value) {
  if (value != 0.0f) expect_dtype("fill", "tensor", t, {DType::f32, DType::bf16, DType::f16, DType::i32});
}

void check_args(check::cast, const Tensor& src, Tensor& dst) {
  expect_same_numel("cast", src, dst);
  if (src.dtype == dst.dtype) return;  // a copy
  expect_dtype("cast", "source", src, kFloat);
  expect_dtype("cast", "destination", dst, kFloat);
}

void check_args(check::add, const Tensor& a, const Tensor& b, Tensor& out) {
  expect_float_like_numel("add", {{"a", &a}, {"b", &b}}, "out", out);
}

void check_args(check::scale, const Tensor& x, float s, Tensor& y) {
  expect_float_like_numel("scale", {{"x", &x}}, "y", y);
}

void check_args(check::bias_add, Tensor& y, const Tensor& bias) {
  expect_rows_of("bias_add", y, bias);
  expect_dtype("bias_add", "y", y, kFloat);
  expect_dtype("bias_add", "bias", bias, kFloat);
}

void check_args(check::bias_grad, const Tensor& dy, Tensor& db) {
  expect_dtype("bias_grad", "db", db, {DType::f32});
  expect_rows_of("bias_grad", dy, db);
  expect_dtype("bias_grad", "dy", dy, kFloat);
}

void check_args(check::gelu_forward, GeluKind kind, const Tensor& x, Tensor& y) {
  expect_float_like_numel("gelu_forward", {{"x", &x}}, "y", y);
}

void check_args(check::gelu_backward, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  expect_float_like_numel("gelu_backward", {{"x", &x}, {"dy", &dy}}, "dx", dx);
}

void check_args(check::tanh_forward, const Tensor& x, Tensor& y) {
  expect_float_like_numel("tanh_forward", {{"x", &x}}, "y", y);
}

void check_args(check::tanh_backward, const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect_float_like_numel("tanh_backward", {{"y", &y}, {"dy", &dy}}, "dx", dx);
}

void check_args(check::dropout_forward, const Tensor& x, const DropoutMask& mask, Tensor& y) {
  check_dropout("dropout_forward", x, mask, y);
}

void check_args(check::dropout_backward, const Tensor& dy, const DropoutMask& mask, Tensor& dx) {
  check_dropout("dropout_backward", dy, mask, dx);
}

void check_args(check::relu_forward, const Tensor& x, Tensor& y) {
  expect_like("relu_forward", x, {&y});
  expect_dtype("relu_forward", "x", x, kFloat);
}

void check_args(check::relu_backward, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  expect_like("relu_backward", y, {&dy, &dx});
  if (dy2.defined()) expect_like("relu_backward", y, {&dy2});
  expect_dtype("relu_backward", "y", y, kFloat);
}

void check_args(check::residual_add, const Tensor& x, Tensor& y) {
  expect_like("residual_add", x, {&y});
  expect_dtype("residual_add", "x", x, kFloat);
}

}  // namespace kiln::ops
