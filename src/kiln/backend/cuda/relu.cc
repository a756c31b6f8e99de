// backend/cuda/relu.cc — ReLU and the residual join on CUDA: checks, then a body of elementwise_bodies.h on the
// context's stream (the join's span body where x and y share a dtype).
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "relu_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  run(ctx, op, y.numel(), ReluForwardBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  const char* op = "relu_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx, &dy2});
  FloatPtr second;  // null: none
  if (dy2.defined()) {
    second = float_ptr(op, "dy2", dy2);
  }
  run(ctx, op, dx.numel(),
      ReluBackwardBody{float_ptr(op, "y", y), float_ptr(op, "dy", dy), float_ptr(op, "dx", dx), second});
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
    run_spans(ctx, op, AccumulateSpanBody<T>{from, to, y.numel(), packs_aligned(from, to)});
  });
}

}  // namespace kiln::ops::cuda
