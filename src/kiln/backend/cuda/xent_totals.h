// backend/cuda/xent_totals.h — the launches the CUDA cross-entropy ops share (losses.cc,
// vocab_xent.cc): the totals, in losses_bodies.h's fixed tree, and the logits' gradient.
#pragma once
#include <algorithm>

#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/op_checks.h"

namespace kiln::ops::cuda {

// totals (3) f64 from the rows' loss terms and hits (N each).
inline void xent_totals(Context& ctx, const char* op, const int32_t* labels, const float* weights,
                        const double* row_loss, const int64_t* row_hit, int64_t N, double* totals) {
  const int64_t chunks = (N + kXentTotalRows - 1) / kXentTotalRows;
  Tensor chunk_totals = ctx.scratch_tensor({std::max<int64_t>(1, 3 * chunks)}, DType::i64);
  double* partial = reinterpret_cast<double*>(chunk_totals.data);
  run(ctx, op, chunks, XentChunkTotalsBody{labels, weights, row_loss, row_hit, N, partial});
  run(ctx, op, 1, XentTotalsBody{partial, chunks, totals});
}

// dlogits (N, V) from the forward's lse and totals (XentGradBody; `start`: a vocabulary shard's
// first column), over spans where the rows fit them.
inline void xent_grad(Context& ctx, const char* op, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                      const Tensor& weights, float smoothing, int64_t start, float scale, const Tensor& totals,
                      XentNorm norm, Tensor& dlogits) {
  const int64_t V = logits.dim(1);
  const double* forward_totals = reinterpret_cast<const double*>(totals.data);
  if (rows_fit_spans(V, {&logits, &dlogits})) {
    return with_float_type(logits.dtype, [&](auto tag) {
      using T = decltype(tag);
      run(ctx, op, logits.numel() / kSpanWidth<T>,
          XentGradSpanBody<T>{logits.ptr<T>(), dlogits.ptr<T>(), lse.ptr<float>(), labels.ptr<int32_t>(),
                              weights_of(weights), V, smoothing, scale, forward_totals, norm, start});
    });
  }
  run(ctx, op, logits.numel(),
      XentGradBody{float_ptr(op, "logits", logits), float_ptr(op, "dlogits", dlogits), lse.ptr<float>(),
                   labels.ptr<int32_t>(), weights_of(weights), V, smoothing, scale, forward_totals, norm, start});
}

}  // namespace kiln::ops::cuda
