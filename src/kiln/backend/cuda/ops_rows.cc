// backend/cuda/ops_rows.cc — softmax forward and backward, the masked attention softmax (alone and
// with its dropout), LayerNorm backward, and the embedding gather / scatter-add on CUDA: checks,
// then bodies of bodies_rows.h.
#include <algorithm>

#include "kiln/backend/cuda/bodies_layernorm.h"
#include "kiln/backend/cuda/bodies_rows.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Items a scatter-add aims for: enough (column, row class) pairs to fill an H200.
constexpr int64_t kScatterItems = 1 << 16;
constexpr int64_t kMaxScatterClasses = 256;

void check_rows(const char* op, const Tensor& table, const Tensor& ids, const Tensor& rows) {
  expect_dtype(op, "ids", ids, {DType::i32});
  KILN_CHECK(table.rank() == 2 && rows.rank() == 2 && table.dim(1) == rows.dim(1) &&
                 rows.dim(0) == ids.numel(),
             "op {}: table {}, ids {}, rows {}", op, shape_str(table.shape), shape_str(ids.shape),
             shape_str(rows.shape));
}

// The softmax of `rows` rows of scores into y: lanes, rows, elements (bodies_rows.h).
void softmax_rows(Context& ctx, const char* op, const SoftmaxScores& scores, const FloatPtr& y, int64_t rows) {
  const ScratchScope own_scratch(ctx);
  // Held until the op returns: without an arena, scratch is device memory of its own.
  Tensor partial_t = ctx.scratch_tensor({rows * kRowLanes * 2}, DType::f32);
  Tensor stats_t = ctx.scratch_tensor({rows * 2}, DType::f32);
  float* partial = partial_t.ptr<float>();
  float* stats = stats_t.ptr<float>();
  run(ctx, op, rows * kRowLanes, SoftmaxLaneBody{scores, partial});
  run(ctx, op, rows, SoftmaxRowStatsBody{partial, stats});
  run(ctx, op, rows * scores.cols, SoftmaxApplyBody{scores, y, stats});
}

}  // namespace

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "softmax_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  expect_same_numel(op, x, y);
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) > 0, "op {}: rows of {} are empty", op, shape_str(x.shape));
  const int64_t cols = x.dim(-1);
  softmax_rows(ctx, op, {float_ptr(op, "x", x), nullptr, 1, cols}, float_ptr(op, "y", y), x.numel() / cols);
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  const char* op = "softmax_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx});
  const ScratchScope own_scratch(ctx);
  expect_same_numel(op, y, dy);
  expect_same_numel(op, y, dx);
  KILN_CHECK(y.rank() >= 1 && y.dim(-1) > 0, "op {}: rows of {} are empty", op, shape_str(y.shape));
  const int64_t cols = y.dim(-1), rows = y.numel() / cols;
  Tensor partial_t = ctx.scratch_tensor({rows * kRowLanes}, DType::f64);
  Tensor dot_t = ctx.scratch_tensor({rows}, DType::f64);
  double* partial = partial_t.ptr<double>();
  double* dot = dot_t.ptr<double>();
  const FloatPtr ys = float_ptr(op, "y", y), dys = float_ptr(op, "dy", dy);
  run(ctx, op, rows * kRowLanes, SoftmaxBackwardLaneBody{ys, dys, cols, partial});
  run(ctx, op, rows, LaneSumBody{partial, dot});
  run(ctx, op, y.numel(), SoftmaxBackwardApplyBody{ys, dys, float_ptr(op, "dx", dx), dot, cols, scale});
}

void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs) {
  const char* op = "attention_softmax_forward";
  const OpScope scope = expect_cuda(ctx, op, {&scores, &mask, &probs});
  expect_same_numel(op, scores, probs);
  expect_dtype(op, "mask", mask, {DType::i32});
  KILN_CHECK(scores.rank() == 4 && mask.rank() == 2 && mask.dim(0) == scores.dim(0) &&
                 mask.dim(1) == scores.dim(3) && scores.dim(3) > 0,
             "op {}: scores {} (B, heads, Sq, Sk) with mask {} (B, Sk)", op,
             shape_str(scores.shape), shape_str(mask.shape));
  const int64_t per_batch = scores.dim(1) * scores.dim(2), Sk = scores.dim(3);
  softmax_rows(ctx, op, {float_ptr(op, "scores", scores), mask.ptr<int32_t>(), per_batch, Sk},
               float_ptr(op, "probs", probs), scores.numel() / Sk);
}

// The fused attention-probability ops as the unfused kernels they are defined by, in turn (the
// masks those of dropout_forward). A kernel of their own waits for a GPU to measure it against.
void attention_probs_forward(Context& ctx, const Tensor& scores, const Tensor& mask, const DropoutMask& drop,
                             Tensor& probs, Tensor& dropped) {
  const char* op = "attention_probs_forward";
  const OpScope scope = expect_cuda(ctx, op, {&scores, &mask, &probs, &dropped, &drop.sample_offset});
  expect_like(op, probs, {&dropped});
  attention_softmax_forward(ctx, scores, mask, probs);
  cuda::dropout_forward(ctx, probs, drop, dropped);
}

void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped) {
  const char* op = "attention_probs_backward";
  const OpScope scope = expect_cuda(ctx, op, {&probs, &dprobs, &dscores, &dropped, &drop.sample_offset});
  KILN_CHECK(probs.rank() == 4, "op {}: probs {} are not (B, heads, Sq, Sk)", op, shape_str(probs.shape));
  expect_like(op, probs, {&dscores, &dropped});
  cuda::dropout_forward(ctx, probs, drop, dropped);
  cuda::dropout_backward(ctx, dprobs, drop, dprobs);
  softmax_backward(ctx, probs, dprobs, scale, dscores);
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  const char* op = "layernorm_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db});
  const ScratchScope own_scratch(ctx);
  const int64_t C = w.numel();
  KILN_CHECK(x.rank() >= 1 && C > 0 && x.dim(-1) == C && dw.numel() == C && db.numel() == C,
             "op {}: input {} with weight {}, dw {} and db {}", op, shape_str(x.shape),
             shape_str(w.shape), shape_str(dw.shape), shape_str(db.shape));
  const int64_t N = x.numel() / C;
  KILN_CHECK(mean.numel() == N && rstd.numel() == N && mean.dtype == DType::f32 &&
                 rstd.dtype == DType::f32,
             "op {}: mean and rstd must be f32 ({})", op, N);
  expect_same_numel(op, x, dy);
  expect_same_numel(op, x, dx);
  expect_dtype(op, "dw", dw, {DType::f32});
  expect_dtype(op, "db", db, {DType::f32});
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

void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  const char* op = "gather_rows";
  const OpScope scope = expect_cuda(ctx, op, {&table, &ids, &out});
  check_rows(op, table, ids, out);
  run(ctx, op, out.numel(),
      GatherBody{float_ptr(op, "table", table), float_ptr(op, "out", out), ids.ptr<int32_t>(),
                 table.dim(0), table.dim(1), first});
}

void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  const char* op = "scatter_add_rows";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &ids, &dtable});
  check_rows(op, dtable, ids, dy);
  const int64_t dim = dtable.dim(1);
  if (dim == 0 || ids.numel() == 0) return;
  const int64_t most = std::max<int64_t>(1, std::min(kMaxScatterClasses, dtable.dim(0)));
  const int64_t classes = std::clamp<int64_t>(kScatterItems / dim, 1, most);
  run(ctx, op, classes * dim,
      ScatterAddBody{float_ptr(op, "dy", dy), float_ptr(op, "dtable", dtable), ids.ptr<int32_t>(),
                     ids.numel(), dtable.dim(0), dim, first, classes});
}

}  // namespace kiln::ops::cuda
