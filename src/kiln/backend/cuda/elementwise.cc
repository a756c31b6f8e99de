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
  // Item = a span of Philox blocks of a sample's part (DropoutBody).
  const int64_t per = x.numel() / m.samples, first = m.element_offset / 4,
                blocks = (m.element_offset + per + 3) / 4 - first;
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    using Body = DropoutBody<X, Y>;
    const X* from = x.ptr<X>();
    Y* to = y.ptr<Y>();
    const int64_t groups = (blocks + Body::kBlocks - 1) / Body::kBlocks;
    const bool aligned =
        packs_aligned(from, to) && per % Body::W == 0 && m.element_offset % Body::W == 0;
    run(ctx, op, m.samples * groups,
        Body{from, to, m.rng, m.sample_offset.ptr<int64_t>(), per, m.element_offset, first, blocks, groups, m.p,
             1.0f / (1.0f - m.p), aligned});
  }, x.dtype, y.dtype);
}

}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  const OpScope scope = expect_cuda(ctx, "add", {&a, &b, &out});
  with_float_types([&](auto at, auto bt, auto ot) {
    using A = decltype(at);
    using B = decltype(bt);
    using O = decltype(ot);
    const A* pa = a.ptr<A>();
    const B* pb = b.ptr<B>();
    O* po = out.ptr<O>();
    run_spans(ctx, "add", AddBody<A, B, O>{pa, pb, po, out.numel(), packs_aligned(pa, pb, po)});
  }, a.dtype, b.dtype, out.dtype);
}

void scale(Context& ctx, const Tensor& x, float s, Tensor& y) {
  const OpScope scope = expect_cuda(ctx, "scale", {&x, &y});
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    const X* from = x.ptr<X>();
    Y* to = y.ptr<Y>();
    run_spans(ctx, "scale", ScaleBody<X, Y>{from, to, y.numel(), packs_aligned(from, to), Scaled{s}});
  }, x.dtype, y.dtype);
}

// Span bodies for one dtype or an f32 bias on bf16 / f16 rows (conv2d's f32 master bias), the
// FloatPtr body for the rest.
void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  const char* op = "bias_add";
  const OpScope scope = expect_cuda(ctx, op, {&y, &bias});
  const FloatPtr ys = float_ptr(op, "y", y), bs = float_ptr(op, "bias", bias);
  const int64_t C = bias.numel();
  if (bias.dtype != y.dtype && bias.dtype != DType::f32)
    return run(ctx, op, y.numel(), BiasAddBody{ys, bs, C});
  with_float_type(y.dtype, [&](auto yt) {
    using Y = decltype(yt);
    auto add_bias = [&](auto bt) {
      using B = decltype(bt);
      using Body = BiasAddSpanBody<Y, B>;
      Y* rows = y.ptr<Y>();
      const B* b = bias.ptr<B>();
      run_spans(ctx, op, Body{rows, b, C, y.numel(), packs_aligned(rows, b) && C % Body::W == 0});
    };
    if (bias.dtype == y.dtype) add_bias(yt);
    else add_bias(float{});
  });
}

void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  const char* op = "bias_grad";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &db});
  const int64_t C = db.numel(), N = dy.numel() / C, chunks = (N + kBiasGradRows - 1) / kBiasGradRows;
  if (chunks == 0) return;
  const ScratchScope own_scratch(ctx);
  Tensor partial = ctx.scratch_tensor({chunks * C}, DType::f64);
  const FloatPtr dys = float_ptr(op, "dy", dy);
  if (rows_fit_spans(C, {&dy})) {
    with_float_type(dy.dtype, [&](auto tag) {
      using T = decltype(tag);
      run(ctx, op, chunks * C / kSpanWidth<T>, BiasGradChunkSpanBody<T>{dy.ptr<T>(), partial.ptr<double>(), N, C});
    });
  } else {
    run(ctx, op, chunks * C, BiasGradChunkBody{dys, partial.ptr<double>(), N, C});
  }
  run(ctx, op, C, BiasGradCombineBody{partial.ptr<double>(), db.ptr<float>(), chunks, C});
}

void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cuda(ctx, "gelu_forward", {&x, &y});
  with_float_types([&](auto xt, auto yt) {
    using X = decltype(xt);
    using Y = decltype(yt);
    const X* from = x.ptr<X>();
    Y* to = y.ptr<Y>();
    run_spans(ctx, "gelu_forward",
              GeluForwardSpanBody<X, Y>{from, to, y.numel(), packs_aligned(from, to), Gelu{kind == GeluKind::tanh}});
  }, x.dtype, y.dtype);
}

void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const OpScope scope = expect_cuda(ctx, "gelu_backward", {&x, &dy, &dx});
  with_float_types([&](auto xt, auto dt, auto ot) {
    using X = decltype(xt);
    using D = decltype(dt);
    using O = decltype(ot);
    const X* px = x.ptr<X>();
    const D* pd = dy.ptr<D>();
    O* po = dx.ptr<O>();
    const GeluGrad grad{kind == GeluKind::tanh};
    run_spans(ctx, "gelu_backward", GeluBackwardBody<X, D, O>{px, pd, po, dx.numel(), packs_aligned(px, pd, po), grad});
  }, x.dtype, dy.dtype, dx.dtype);
}

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "tanh_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  if (x.dtype != y.dtype)
    return run(ctx, op, y.numel(), TanhForwardBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
  expect_dtype(op, "x", x, kFloat);
  with_float_type(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T* from = x.ptr<T>();
    T* to = y.ptr<T>();
    run_spans(ctx, op, TanhForwardSpanBody<T>{from, to, y.numel(), packs_aligned(from, to)});
  });
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "tanh_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx});
  if (y.dtype != dy.dtype || y.dtype != dx.dtype)
    return run(ctx, op, dx.numel(),
               TanhBackwardBody{float_ptr(op, "y", y), float_ptr(op, "dy", dy), float_ptr(op, "dx", dx)});
  expect_dtype(op, "y", y, kFloat);
  with_float_type(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T *py = y.ptr<T>(), *pd = dy.ptr<T>();
    T* po = dx.ptr<T>();
    run_spans(ctx, op, TanhBackwardSpanBody<T>{py, pd, po, dx.numel(), packs_aligned(py, pd, po)});
  });
}

void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y) {
  dropout(ctx, "dropout_forward", x, mask, y);
}

void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx) {
  dropout(ctx, "dropout_backward", dy, mask, dx);
}

}  // namespace kiln::ops::cuda
