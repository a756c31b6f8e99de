// backend/cuda/ops_losses.cc — softmax cross-entropy and its vocab-parallel parts on CUDA:
// checks, then bodies of bodies_losses.h. Labels stay on the device: a label >= V is not a host
// error here but a NaN loss (bodies_losses.h), so that no op in the step waits for the GPU.
#include <algorithm>

#include "kiln/backend/cuda/bodies_losses.h"
#include "kiln/backend/cuda/bodies_rows.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/backend/vocab_xent_check.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// N of logits (N, V); labels (N) i32, rows (N * row_width) values, weights (N) f32 or undefined.
int64_t check_rows(const char* op, const Tensor& logits, const Tensor& labels,
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

const float* weights_of(const Tensor& weights) {
  return weights.defined() ? weights.ptr<float>() : nullptr;
}

void check_grad(const char* op, const Tensor& logits, const Tensor& lse, const Tensor& dlogits) {
  expect_dtype(op, "lse", lse, {DType::f32});
  KILN_CHECK(dlogits.shape == logits.shape, "op {}: dlogits {} for logits {}", op,
             shape_str(dlogits.shape), shape_str(logits.shape));
}

}  // namespace

void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals) {
  const char* op = "softmax_xent_forward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &labels, &weights, &lse, &totals});
  const ScratchScope own_scratch(ctx);
  const int64_t N = check_rows(op, logits, labels, weights, lse, 1);
  expect_dtype(op, "lse", lse, {DType::f32});
  expect_xent_totals(op, totals);
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
  run(ctx, op, lanes, XentMaxLaneBody{z, V, lane_max.ptr<float>(), lane_at, lane_zsum});
  run(ctx, op, lanes, XentSumexpLaneBody{z, V, lane_max.ptr<float>(), lane_at, lane_sum});
  run(ctx, op, N,
      XentRowBody{z, labels.ptr<int32_t>(), w, lane_max.ptr<float>(), lane_at, lane_zsum, lane_sum, lse.ptr<float>(),
                  row_loss, row_hit, V, label_smoothing});
  run(ctx, op, 1,
      XentTotalsBody{labels.ptr<int32_t>(), w, row_loss, row_hit, N,
                     reinterpret_cast<double*>(totals.data)});
}

void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const char* op = "softmax_xent_backward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &lse, &labels, &weights, &totals, &dlogits});
  expect_xent_totals(op, totals);
  check_rows(op, logits, labels, weights, lse, 1);
  check_grad(op, logits, lse, dlogits);
  run(ctx, op, logits.numel(),
      XentGradBody{float_ptr(op, "logits", logits), float_ptr(op, "dlogits", dlogits),
                   lse.ptr<float>(), labels.ptr<int32_t>(), weights_of(weights), logits.dim(1),
                   label_smoothing, scale, reinterpret_cast<const double*>(totals.data), norm});
}

void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials) {
  const char* op = "vocab_xent_partials";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &labels, &partials});
  const int64_t N = check_rows(op, logits, labels, Tensor{}, partials, 3);
  expect_dtype(op, "partials", partials, {DType::f32});
  const ScratchScope own_scratch(ctx);
  const int64_t V = logits.dim(1), lanes = N * kRowLanes;
  // Held until the op returns: without an arena, scratch is device memory of its own.
  Tensor lane_max = ctx.scratch_tensor({lanes}, DType::f32), lane_at = ctx.scratch_tensor({lanes}, DType::i64),
               lane_zsum = ctx.scratch_tensor({lanes}, DType::f64);
  const FloatPtr z = float_ptr(op, "logits", logits);
  run(ctx, op, lanes, XentMaxLaneBody{z, V, lane_max.ptr<float>(), lane_at.ptr<int64_t>(), lane_zsum.ptr<double>()});
  run(ctx, op, N,
      VocabPartialsBody{z, labels.ptr<int32_t>(), lane_max.ptr<float>(), lane_at.ptr<int64_t>(),
                        partials.ptr<float>(), V, start});
}

void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  const char* op = "vocab_xent_sumexp";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &max, &sumexp});
  KILN_CHECK(logits.rank() == 2 && max.numel() == logits.dim(0) &&
                 sumexp.numel() == logits.dim(0),
             "op {}: logits {}, max {}, sumexp {}", op, shape_str(logits.shape),
             shape_str(max.shape), shape_str(sumexp.shape));
  expect_dtype(op, "max", max, {DType::f32});
  expect_dtype(op, "sumexp", sumexp, {DType::f64});
  const ScratchScope own_scratch(ctx);
  const int64_t N = logits.dim(0);
  Tensor lane_sum = ctx.scratch_tensor({N * kRowLanes}, DType::f64);  // held until the op returns
  run(ctx, op, N * kRowLanes,
      VocabSumexpLaneBody{float_ptr(op, "logits", logits), max.ptr<float>(), lane_sum.ptr<double>(), logits.dim(1)});
  run(ctx, op, N, LaneSumBody{lane_sum.ptr<double>(), sumexp.ptr<double>()});
}

void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined) {
  const char* op = "vocab_xent_combine";
  const OpScope scope = expect_cuda(ctx, op, {&gathered, &combined});
  const int64_t N = check_vocab_combine(op, gathered, combined);
  run(ctx, op, N, VocabCombineBody{gathered.ptr<float>(), combined.ptr<float>(), gathered.dim(0), N});
}

void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals) {
  const char* op = "vocab_xent_totals";
  const OpScope scope = expect_cuda(ctx, op, {&combined, &sumexp, &labels, &weights, &lse, &totals});
  const int64_t N = check_vocab_totals(op, combined, sumexp, labels, weights, lse, totals);
  Tensor rows = ctx.scratch_tensor({2, N}, DType::i64);  // per row: loss term (f64 bits), hit
  double* row_loss = reinterpret_cast<double*>(rows.data);
  int64_t* row_hit = rows.ptr<int64_t>() + N;
  const float* w = weights_of(weights);
  run(ctx, op, N,
      VocabRowTotalsBody{combined.ptr<float>(), sumexp.ptr<double>(), labels.ptr<int32_t>(), w, lse.ptr<float>(),
                         row_loss, row_hit, N});
  run(ctx, op, 1, XentTotalsBody{labels.ptr<int32_t>(), w, row_loss, row_hit, N, reinterpret_cast<double*>(totals.data)});
}

void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const char* op = "vocab_xent_backward";
  const OpScope scope = expect_cuda(ctx, op, {&logits, &lse, &labels, &weights, &totals, &dlogits});
  expect_xent_totals(op, totals);
  check_rows(op, logits, labels, weights, lse, 1);
  check_grad(op, logits, lse, dlogits);
  run(ctx, op, logits.numel(),
      VocabGradBody{float_ptr(op, "logits", logits), float_ptr(op, "dlogits", dlogits),
                    lse.ptr<float>(), labels.ptr<int32_t>(), weights_of(weights), logits.dim(1),
                    start, scale, reinterpret_cast<const double*>(totals.data), norm});
}

}  // namespace kiln::ops::cuda
