// backend/cuda/elementwise.cc — add, scale, the bias add and bias gradient, GELU, tanh and dropout
// on CUDA: checks, then bodies of elementwise_bodies.h / rows_bodies.h on the
// context's stream.
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

void dropout(Context& ctx, const char* op, const Tensor& x, const DropoutMask& m, Tensor& y) {
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &m.sample_offset});
  // Item = one Philox block of a sample's part (DropoutBody).
  const int64_t per = x.numel() / m.samples, first = m.element_offset / 4,
                blocks = (m.element_offset + per + 3) / 4 - first;
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    run(ctx, op, m.samples * blocks,
        DropoutBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), m.rng, m.sample_offset.ptr<int64_t>(), per, m.element_offset,
                          first, blocks, m.p, 1.0f / (1.0f - m.p)});
  }, x.dtype, y.dtype);
}

}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  const OpScope scope = expect_cuda(ctx, "add", {&a, &b, &out});
  with_float_types([&](auto at, auto bt, auto ot) {
    using A = decltype(at);
    using B = decltype(bt);
    using O = decltype(ot);
    run(ctx, "add", out.numel(), AddBody<A, B, O>{a.ptr<A>(), b.ptr<B>(), out.ptr<O>()});
  }, a.dtype, b.dtype, out.dtype);
}

void scale(Context& ctx, const Tensor& x, float s, Tensor& y) {
  const OpScope scope = expect_cuda(ctx, "scale", {&x, &y});
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    run(ctx, "scale", y.numel(), ScaleBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), s});
  }, x.dtype, y.dtype);
}

void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  const char* op = "bias_add";
  const OpScope scope = expect_cuda(ctx, op, {&y, &bias});
  run(ctx, op, y.numel(),
      BiasAddBody{float_ptr(op, "y", y), float_ptr(op, "bias", bias), bias.numel()});
}

void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  const char* op = "bias_grad";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &db});
  const int64_t C = db.numel(), N = dy.numel() / C, chunks = (N + kBiasGradRows - 1) / kBiasGradRows;
  if (chunks == 0) return;
  const ScratchScope own_scratch(ctx);
  Tensor partial = ctx.scratch_tensor({chunks * C}, DType::f64);
  run(ctx, op, chunks * C, BiasGradChunkBody{float_ptr(op, "dy", dy), partial.ptr<double>(), N, C});
  run(ctx, op, C, BiasGradCombineBody{partial.ptr<double>(), db.ptr<float>(), chunks, C});
}

void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cuda(ctx, "gelu_forward", {&x, &y});
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    run(ctx, "gelu_forward", y.numel(), GeluForwardBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), kind == GeluKind::tanh});
  }, x.dtype, y.dtype);
}

void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const OpScope scope = expect_cuda(ctx, "gelu_backward", {&x, &dy, &dx});
  with_float_types([&](auto xt, auto dt, auto ot) {
    using X = decltype(xt);
    using D = decltype(dt);
    using O = decltype(ot);
    run(ctx, "gelu_backward", dx.numel(),
        GeluBackwardBody<X, D, O>{x.ptr<X>(), dy.ptr<D>(), dx.ptr<O>(), kind == GeluKind::tanh});
  }, x.dtype, dy.dtype, dx.dtype);
}

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "tanh_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  run(ctx, op, y.numel(), TanhForwardBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "tanh_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx});
  run(ctx, op, dx.numel(),
      TanhBackwardBody{float_ptr(op, "y", y), float_ptr(op, "dy", dy), float_ptr(op, "dx", dx)});
}

void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y) {
  dropout(ctx, "dropout_forward", x, mask, y);
}

void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx) {
  dropout(ctx, "dropout_backward", dy, mask, dx);
}

}  // namespace kiln::ops::cuda
