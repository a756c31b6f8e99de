// backend/conv_check.cc — the argument checks of the convolutions (backend/checks.h), made once in
// the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// The geometry, then x (N, H, W, C), w (K, C/groups, R, S) and y (N, P, Q, K) against it.
void check_conv(const char* op, const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& y,
                const char* x_name, const char* y_name) {
  KILN_CHECK(s.groups >= 1 && s.C % s.groups == 0 && s.K % s.groups == 0,
             "conv2d: channels {} -> {} are not divisible by groups {}", s.C, s.K, s.groups);
  KILN_CHECK(s.P() > 0 && s.Q() > 0, "conv2d: input {}x{} is too small for kernel {}x{}", s.H, s.W, s.R, s.S);
  const Shape xs{s.N, s.H, s.W, s.C}, ws{s.K, s.C / s.groups, s.R, s.S}, ys{s.N, s.P(), s.Q(), s.K};
  KILN_CHECK(x.shape == xs, "op {}: {} is {}, the convolution takes {}", op, x_name, shape_str(x.shape),
             shape_str(xs));
  KILN_CHECK(w.shape == ws, "op {}: weights are {}, the convolution takes {}", op, shape_str(w.shape),
             shape_str(ws));
  KILN_CHECK(y.shape == ys, "op {}: {} is {}, the convolution makes {}", op, y_name, shape_str(y.shape),
             shape_str(ys));
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype == b.dtype, "op {}: dtypes {} and {} differ", op, dtype_name(a.dtype), dtype_name(b.dtype));
}

// The activations a of a float dtype, and the weights w and activations b of the other side of
// the convolution in a's dtype.
void check_dtypes(const char* op, const Tensor& a, const Tensor& w, const Tensor& b) {
  check_same_dtype(op, a, w);
  check_same_dtype(op, a, b);
  expect_dtype(op, "activations", a, kFloat);
}

}  // namespace

void check_args(check::conv2d_forward, const ConvShape& s, const Tensor& x, const Tensor& w, Tensor& y) {
  const char* op = "conv2d_forward";
  check_dtypes(op, x, w, y);
  check_conv(op, s, x, w, y, "input", "output");
}

void check_args(check::conv2d_backward_data, const ConvShape& s, const Tensor& dy, const Tensor& w,
                Tensor& dx) {
  const char* op = "conv2d_backward_data";
  check_dtypes(op, dy, w, dx);
  check_conv(op, s, dx, w, dy, "input gradient", "output gradient");
}

void check_args(check::conv2d_backward_weights, const ConvShape& s, const Tensor& x, const Tensor& dy,
                Tensor& dw, bool accumulate) {
  const char* op = "conv2d_backward_weights";
  check_same_dtype(op, x, dy);
  expect_dtype(op, "activations", x, kFloat);
  expect_dtype(op, "weight gradient", dw, {DType::f32});
  check_conv(op, s, x, dw, dy, "input", "output gradient");
}

}  // namespace kiln::ops
