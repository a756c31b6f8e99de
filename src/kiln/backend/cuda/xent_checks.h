// backend/cuda/xent_checks.h — what the CUDA cross-entropy ops (losses.cc, vocab_xent.cc) check
// of their rows, and the launches of their totals.
#pragma once
#include <algorithm>

#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {

// N of logits (N, V); labels (N) i32, rows (N * row_width) values, weights (N) f32 or undefined.
inline int64_t check_xent_rows(const char* op, const Tensor& logits, const Tensor& labels,
                              const Tensor& weights, const Tensor& rows, int64_t row_width) {
  KILN_CHECK(logits.rank() == 2, "op {}: logits {} are not (N, V)", op, shape_str(logits.shape));
  const int64_t N = logits.dim(0);
  expect_dtype(op, "labels", labels, {DType::i32});
  KILN_CHECK(labels.numel() == N && rows.numel() == N * row_width,
             "op {}: logits {} need {} labels and {} x {} row values, got {} and {}", op,
             shape_str(logits.shape), N, N, row_width, labels.numel(), rows.numel());
  if (weights.defined()) {
    expect_dtype(op, "weights", weights, {DType::f32});
    KILN_CHECK(weights.numel() == N, "op {}: {} weights for {} rows", op, weights.numel(), N);
  }
  return N;
}

inline const float* weights_of(const Tensor& weights) {
  return weights.defined() ? weights.ptr<float>() : nullptr;
}

inline void check_grad(const char* op, const Tensor& logits, const Tensor& lse, const Tensor& dlogits) {
  expect_dtype(op, "lse", lse, {DType::f32});
  KILN_CHECK(dlogits.shape == logits.shape, "op {}: dlogits {} for logits {}", op,
             shape_str(dlogits.shape), shape_str(logits.shape));
}

// totals (3) f64 from the rows' loss terms and hits (N each), in losses_bodies.h's tree.
inline void xent_totals(Context& ctx, const char* op, const int32_t* labels, const float* weights,
                        const double* row_loss, const int64_t* row_hit, int64_t N, double* totals) {
  const int64_t chunks = (N + kXentTotalRows - 1) / kXentTotalRows;
  Tensor chunk_totals = ctx.scratch_tensor({std::max<int64_t>(1, 3 * chunks)}, DType::i64);
  double* partial = reinterpret_cast<double*>(chunk_totals.data);
  run(ctx, op, chunks, XentChunkTotalsBody{labels, weights, row_loss, row_hit, N, partial});
  run(ctx, op, 1, XentTotalsBody{partial, chunks, totals});
}

}  // namespace kiln::ops::cuda
