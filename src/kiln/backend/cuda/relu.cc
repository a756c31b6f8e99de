// backend/cuda/relu.cc — ReLU and the residual join on CUDA: checks, then a body of elementwise_bodies.h on the
// context's stream: span bodies where the operands share a dtype.
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "relu_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  const FloatPtr xs = float_ptr(op, "x", x), ys = float_ptr(op, "y", y);
  if (x.dtype != y.dtype) return run(ctx, op, y.numel(), ReluForwardBody{xs, ys});
  with_float_type(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T* from = x.ptr<T>();
    T* to = y.ptr<T>();
    run_spans(ctx, op, ReluForwardSpanBody<T>{from, to, y.numel(), packs_aligned(from, to)});
  });
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  const char* op = "relu_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx, &dy2});
  FloatPtr second;  // null: none
  if (dy2.defined()) {
    second = float_ptr(op, "dy2", dy2);
  }
  const FloatPtr ys = float_ptr(op, "y", y), dys = float_ptr(op, "dy", dy), dxs = float_ptr(op, "dx", dx);
  if (dy.dtype != y.dtype || dx.dtype != y.dtype || (dy2.defined() && dy2.dtype != y.dtype))
    return run(ctx, op, dx.numel(), ReluBackwardBody{ys, dys, dxs, second});
  with_float_type(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T *py = y.ptr<T>(), *pd = dy.ptr<T>(), *pd2 = dy2.defined() ? dy2.ptr<T>() : nullptr;
    T* po = dx.ptr<T>();
    run_spans(ctx, op, ReluBackwardSpanBody<T>{py, pd, po, pd2, dx.numel(), packs_aligned(py, pd, po, pd2)});
  });
}

void residual_add(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "residual_add";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  const FloatPtr xs = float_ptr(op, "x", x), ys = float_ptr(op, "y", y);
  if (x.dtype != y.dtype) return run(ctx, op, y.numel(), AccumulateBody{xs, ys});
  with_float_type(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T* from = x.ptr<T>();
    T* to = y.ptr<T>();
    run_spans(ctx, op, AddBody<T, T, T>{to, from, to, y.numel(), packs_aligned(from, to)});  // y = y + x
  });
}

}  // namespace kiln::ops::cuda
