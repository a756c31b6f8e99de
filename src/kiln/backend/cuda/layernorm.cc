// backend/cuda/layernorm.cc — LayerNorm forward (alone and after the residual join) and backward on
// CUDA: checks, then the bodies of layernorm_bodies.h.
#include <algorithm>

#include "kiln/backend/cuda/layernorm_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

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
  run(ctx, op, N * kRowLanes, moments);
  run(ctx, op, N, LayerNormStatsBody{partial, C, eps, mean.ptr<float>(), rstd.ptr<float>()});
  run(ctx, op, N * C,
      LayerNormApplyBody{join ? moments.sum : moments.x, float_ptr(op, "weight", w), float_ptr(op, "bias", b),
                         float_ptr(op, "y", y), mean.ptr<float>(), rstd.ptr<float>(), C});
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
  run(ctx, op, chunks * C, LayerNormParamChunkBody{xs, dys, m, s, N, C, chunk_sums.ptr<float>()});
  run(ctx, op, C, LayerNormParamSumBody{chunk_sums.ptr<float>(), chunks, C, dw.ptr<float>(), db.ptr<float>()});
  Tensor lanes = ctx.scratch_tensor({N * kRowLanes * 2}, DType::i64);
  Tensor means = ctx.scratch_tensor({N * 2}, DType::f32);
  double* partial = reinterpret_cast<double*>(lanes.data);
  run(ctx, op, N * kRowLanes, LayerNormGradLaneBody{xs, dys, ws, m, s, C, partial});
  run(ctx, op, N, LayerNormGradStatsBody{partial, C, means.ptr<float>()});
  run(ctx, op, N * C,
      LayerNormGradApplyBody{xs, dys, ws, float_ptr(op, "dx", dx), m, s, means.ptr<float>(), C, accumulate_dx});
}

}  // namespace kiln::ops::cuda
