// backend/cuda/layernorm.cc — LayerNorm forward (alone and after the residual join) and backward on
// CUDA: checks, then the bodies of layernorm_bodies.h (the span bodies where the operands allow).
#include <algorithm>

#include "kiln/backend/cuda/layernorm_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// The moments' and apply passes as span bodies; `residual` and `sum` may be undefined.
void forward_spans(Context& ctx, const char* op, const Tensor& x, const Tensor& residual, Tensor& sum,
                   const Tensor& w, const Tensor& b, Tensor& y, double* partial, float* mean, float* rstd,
                   float eps) {
  const int64_t C = w.numel(), N = x.numel() / C;
  with_float_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    RowMomentsSpanBody<T> moments{x.ptr<T>(), C, partial};
    if (residual.defined()) moments.residual = residual.ptr<T>(), moments.sum = sum.ptr<T>();
    run(ctx, op, N * moments.kGroups, moments);
    run(ctx, op, N, LayerNormStatsBody{partial, C, eps, mean, rstd});
    const T* normed = residual.defined() ? moments.sum : moments.x;
    run(ctx, op, N * C / moments.W,
        LayerNormApplySpanBody<T>{normed, w.ptr<T>(), b.ptr<T>(), y.ptr<T>(), mean, rstd, C});
  });
}

// layernorm_forward, or add_layernorm_forward when `residual` is defined: the join is taken in
// the moments' launch, and the rest reads its sum.
void forward_layernorm(const char* op, Context& ctx, const Tensor& x, const Tensor& residual, Tensor& sum,
                       const Tensor& w, const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const OpScope scope = expect_cuda(ctx, op, {&x, &residual, &sum, &w, &b, &y, &mean, &rstd});
  const ScratchScope own_scratch(ctx);
  const int64_t C = w.numel(), N = x.numel() / C;
  const bool join = residual.defined();
  Tensor holder = ctx.scratch_tensor({N * kRowLanes * 2}, DType::i64);
  double* partial = reinterpret_cast<double*>(holder.data);
  RowMomentsLaneBody moments{float_ptr(op, "x", x), C, partial};
  if (join) moments.residual = float_ptr(op, "residual", residual), moments.sum = float_ptr(op, "sum", sum);
  const FloatPtr ws = float_ptr(op, "weight", w), bs = float_ptr(op, "bias", b), ys = float_ptr(op, "y", y);
  if (rows_fit_spans(C, {&x, &residual, &sum, &w, &b, &y}))
    return forward_spans(ctx, op, x, residual, sum, w, b, y, partial, mean.ptr<float>(), rstd.ptr<float>(), eps);
  run(ctx, op, N * kRowLanes, moments);
  run(ctx, op, N, LayerNormStatsBody{partial, C, eps, mean.ptr<float>(), rstd.ptr<float>()});
  run(ctx, op, N * C,
      LayerNormApplyBody{join ? moments.sum : moments.x, ws, bs, ys, mean.ptr<float>(), rstd.ptr<float>(), C});
}

// backward's dx part (lanes, row means, apply) as span bodies.
void backward_dx_spans(Context& ctx, const char* op, const Tensor& dy, const Tensor& x, const Tensor& w,
                       const float* mean, const float* rstd, Tensor& dx, double* partial, float* means,
                       bool accumulate_dx) {
  const int64_t C = w.numel(), N = x.numel() / C;
  with_float_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x.ptr<T>(), *dys = dy.ptr<T>(), *ws = w.ptr<T>();
    const LayerNormGradSpanBody<T> lanes{xs, dys, ws, mean, rstd, C, partial};
    run(ctx, op, N * lanes.kGroups, lanes);
    run(ctx, op, N, LayerNormGradStatsBody{partial, C, means});
    run(ctx, op, N * C / lanes.W,
        LayerNormGradApplySpanBody<T>{xs, dys, ws, dx.ptr<T>(), mean, rstd, means, C, accumulate_dx});
  });
}

}  // namespace

void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  Tensor no_sum;
  forward_layernorm("layernorm_forward", ctx, x, Tensor{}, no_sum, w, b, eps, y, mean, rstd);
}

void add_layernorm_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& w,
                           const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  forward_layernorm("add_layernorm_forward", ctx, a, b, sum, w, bias, eps, y, mean, rstd);
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  const char* op = "layernorm_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db});
  const ScratchScope own_scratch(ctx);
  const int64_t C = w.numel(), N = x.numel() / C;
  const FloatPtr xs = float_ptr(op, "x", x), dys = float_ptr(op, "dy", dy), ws = float_ptr(op, "weight", w);
  const float *m = mean.ptr<float>(), *s = rstd.ptr<float>();
  // Parameter gradients first: dx may alias dy.
  const int64_t chunks = (N + kLayerNormGradRows - 1) / kLayerNormGradRows;
  Tensor chunk_sums = ctx.scratch_tensor({std::max<int64_t>(1, chunks * C * 2)}, DType::f32);
  const bool spans = rows_fit_spans(C, {&x, &dy, &w, &dx});
  if (spans) {
    with_float_type(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      run(ctx, op, chunks * C / kSpanWidth<T>,
          LayerNormParamChunkSpanBody<T>{x.ptr<T>(), dy.ptr<T>(), m, s, N, C, chunk_sums.ptr<float>()});
    });
  } else {
    run(ctx, op, chunks * C, LayerNormParamChunkBody{xs, dys, m, s, N, C, chunk_sums.ptr<float>()});
  }
  run(ctx, op, C, LayerNormParamSumBody{chunk_sums.ptr<float>(), chunks, C, dw.ptr<float>(), db.ptr<float>()});
  Tensor lanes = ctx.scratch_tensor({N * kRowLanes * 2}, DType::i64);
  Tensor means = ctx.scratch_tensor({N * 2}, DType::f32);
  double* partial = reinterpret_cast<double*>(lanes.data);
  const FloatPtr dxs = float_ptr(op, "dx", dx);
  if (spans) return backward_dx_spans(ctx, op, dy, x, w, m, s, dx, partial, means.ptr<float>(), accumulate_dx);
  run(ctx, op, N * kRowLanes, LayerNormGradLaneBody{xs, dys, ws, m, s, C, partial});
  run(ctx, op, N, LayerNormGradStatsBody{partial, C, means.ptr<float>()});
  run(ctx, op, N * C, LayerNormGradApplyBody{xs, dys, ws, dxs, m, s, means.ptr<float>(), C, accumulate_dx});
}

}  // namespace kiln::ops::cuda
