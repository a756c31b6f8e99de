// backend/cuda/losses.cc — softmax cross-entropy on CUDA: checks, then bodies of losses_bodies.h
// (the span bodies where the logits allow).
// Labels stay on the device: a label >= V is not a host error here but a NaN loss
// (losses_bodies.h), so that no op in the step waits for the GPU.
#include <algorithm>

#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/backend/cuda/xent_totals.h"

namespace kiln::ops::cuda {

void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals) {
  const char* op = "softmax_xent_forward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &labels, &weights, &lse, &totals});
  const ScratchScope own_scratch(ctx);
  const int64_t N = logits.dim(0);
  // Per row: the loss term (f64 bits) and the hit, added up in row order by the second launch.
  Tensor rows = ctx.scratch_tensor({2, N}, DType::i64);
  double* row_loss = reinterpret_cast<double*>(rows.data);
  int64_t* row_hit = rows.ptr<int64_t>() + N;
  const float* w = weights_of(weights);
  const FloatPtr z = float_ptr(op, "logits", logits);
  const int64_t V = logits.dim(1), lanes = N * kRowLanes;
  Tensor lane_max = ctx.scratch_tensor({std::max<int64_t>(1, lanes)}, DType::f32);
  Tensor lane_sums = ctx.scratch_tensor({std::max<int64_t>(1, 3 * lanes)}, DType::i64);  // at, Σz, Σexp
  int64_t* lane_at = lane_sums.ptr<int64_t>();
  double* lane_zsum = reinterpret_cast<double*>(lane_at + lanes);
  double* lane_sum = lane_zsum + lanes;
  if (rows_fit_spans(V, {&logits})) {
    with_float_type(logits.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* zs = logits.ptr<T>();
      const int64_t groups = N * XentMaxLaneSpanBody<T>::kGroups;
      run(ctx, op, groups, XentMaxLaneSpanBody<T>{zs, V, lane_max.ptr<float>(), lane_at, lane_zsum});
      run(ctx, op, groups, XentSumexpLaneSpanBody<T>{zs, V, lane_max.ptr<float>(), lane_at, lane_sum});
    });
  } else {
    run(ctx, op, lanes, XentMaxLaneBody{z, V, lane_max.ptr<float>(), lane_at, lane_zsum});
    run(ctx, op, lanes, XentSumexpLaneBody{z, V, lane_max.ptr<float>(), lane_at, lane_sum});
  }
  run(ctx, op, N,
      XentRowBody{z, labels.ptr<int32_t>(), w, lane_max.ptr<float>(), lane_at, lane_zsum, lane_sum, lse.ptr<float>(),
                  row_loss, row_hit, V, label_smoothing});
  xent_totals(ctx, op, labels.ptr<int32_t>(), w, row_loss, row_hit, N, reinterpret_cast<double*>(totals.data));
}

void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const char* op = "softmax_xent_backward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &lse, &labels, &weights, &totals, &dlogits});
  xent_grad(ctx, op, logits, lse, labels, weights, label_smoothing, 0, scale, totals, norm, dlogits);
}

}  // namespace kiln::ops::cuda
