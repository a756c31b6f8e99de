// backend/cuda/vocab_xent.cc — the vocab-parallel cross-entropy's parts on CUDA: checks, then bodies
// of losses_bodies.h (the span bodies where the logits allow).
#include <algorithm>

#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/backend/cuda/xent_totals.h"

namespace kiln::ops::cuda {

void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials) {
  const char* op = "vocab_xent_partials";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &labels, &partials});
  const int64_t N = logits.dim(0);
  const ScratchScope own_scratch(ctx);
  const int64_t V = logits.dim(1), lanes = N * kRowLanes;
  // Held until the op returns: without an arena, scratch is device memory of its own.
  Tensor lane_max = ctx.scratch_tensor({lanes}, DType::f32), lane_at = ctx.scratch_tensor({lanes}, DType::i64),
               lane_zsum = ctx.scratch_tensor({lanes}, DType::f64);
  const FloatPtr z = float_ptr(op, "logits", logits);
  if (rows_fit_spans(V, {&logits})) {
    with_float_type(logits.dtype, [&](auto tag) {
      using T = decltype(tag);
      run(ctx, op, N * XentMaxLaneSpanBody<T>::kGroups,
          XentMaxLaneSpanBody<T>{logits.ptr<T>(), V, lane_max.ptr<float>(), lane_at.ptr<int64_t>(),
                                 lane_zsum.ptr<double>()});
    });
  } else {
    run(ctx, op, lanes, XentMaxLaneBody{z, V, lane_max.ptr<float>(), lane_at.ptr<int64_t>(), lane_zsum.ptr<double>()});
  }
  run(ctx, op, N,
      VocabPartialsBody{z, labels.ptr<int32_t>(), lane_max.ptr<float>(), lane_at.ptr<int64_t>(),
                        partials.ptr<float>(), V, start});
}

void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  const char* op = "vocab_xent_sumexp";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &max, &sumexp});
  const ScratchScope own_scratch(ctx);
  const int64_t N = logits.dim(0);
  Tensor lane_sum = ctx.scratch_tensor({N * kRowLanes}, DType::f64);  // held until the op returns
  const FloatPtr z = float_ptr(op, "logits", logits);
  const int64_t V = logits.dim(1);
  if (rows_fit_spans(V, {&logits})) {
    with_float_type(logits.dtype, [&](auto tag) {
      using T = decltype(tag);
      run(ctx, op, N * VocabSumexpLaneSpanBody<T>::kGroups,
          VocabSumexpLaneSpanBody<T>{logits.ptr<T>(), max.ptr<float>(), lane_sum.ptr<double>(), V});
    });
  } else {
    run(ctx, op, N * kRowLanes, VocabSumexpLaneBody{z, max.ptr<float>(), lane_sum.ptr<double>(), V});
  }
  run(ctx, op, N, LaneSumBody{lane_sum.ptr<double>(), sumexp.ptr<double>()});
}

void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined) {
  const char* op = "vocab_xent_combine";
  const OpScope scope = expect_cuda(ctx, op, {&gathered, &combined});
  const int64_t N = combined.dim(1);
  run(ctx, op, N, VocabCombineBody{gathered.ptr<float>(), combined.ptr<float>(), gathered.dim(0), N});
}

void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals) {
  const char* op = "vocab_xent_totals";
  const OpScope scope = expect_cuda(ctx, op, {&combined, &sumexp, &labels, &weights, &lse, &totals});
  const ScratchScope own_scratch(ctx);
  const int64_t N = combined.dim(1);
  Tensor rows = ctx.scratch_tensor({2, N}, DType::i64);  // per row: loss term (f64 bits), hit
  double* row_loss = reinterpret_cast<double*>(rows.data);
  int64_t* row_hit = rows.ptr<int64_t>() + N;
  const float* w = weights_of(weights);
  run(ctx, op, N,
      VocabRowTotalsBody{combined.ptr<float>(), sumexp.ptr<double>(), labels.ptr<int32_t>(), w, lse.ptr<float>(),
                         row_loss, row_hit, N});
  xent_totals(ctx, op, labels.ptr<int32_t>(), w, row_loss, row_hit, N, reinterpret_cast<double*>(totals.data));
}

void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const char* op = "vocab_xent_backward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &lse, &labels, &weights, &totals, &dlogits});
  xent_grad(ctx, op, logits, lse, labels, weights, 0.0f, start, scale, totals, norm, dlogits);
}

}  // namespace kiln::ops::cuda
