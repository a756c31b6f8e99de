// backend/cuda/softmax.cc — softmax forward and backward and the masked attention softmax (alone and
// with its dropout) on CUDA: checks, then the bodies of rows_bodies.h (the span bodies where the
// operands allow).
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"

namespace kiln::ops::cuda {
namespace {

// Whether x and y share a dtype whose span divides cols, and are 16-byte aligned with the mask:
// then the span bodies run (rows_bodies.h).
bool spans_fit(const FloatPtr& x, const FloatPtr& y, const int32_t* mask, int64_t cols) {
  if (x.dtype != y.dtype || !packs_aligned(x.p, y.p, mask)) return false;
  bool whole = false;
  with_float_type(x.dtype, [&](auto t) { whole = cols % kSpanWidth<decltype(t)> == 0; });
  return whole;
}

// The softmax of `rows` rows of scores into y: lanes, rows, elements (rows_bodies.h).
void softmax_rows(Context& ctx, const char* op, const SoftmaxScores& scores, const FloatPtr& y, int64_t rows) {
  const ScratchScope own_scratch(ctx);
  // Held until the op returns: without an arena, scratch is device memory of its own.
  Tensor partial_t = ctx.scratch_tensor({rows * kRowLanes * 2}, DType::f32);
  Tensor stats_t = ctx.scratch_tensor({rows * 2}, DType::f32);
  float* partial = partial_t.ptr<float>();
  float* stats = stats_t.ptr<float>();
  const int64_t cols = scores.cols;
  if (spans_fit(scores.x, y, scores.mask, cols)) {
    return with_float_type(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      const SoftmaxSpanScores<T> span_scores{static_cast<const T*>(scores.x.p), scores.mask, scores.per_batch, cols};
      run(ctx, op, rows * SoftmaxLaneSpanBody<T>::kGroups, SoftmaxLaneSpanBody<T>{span_scores, partial});
      run(ctx, op, rows, SoftmaxRowStatsBody{partial, stats});
      run(ctx, op, rows * cols / span_scores.W, SoftmaxApplySpanBody<T>{span_scores, static_cast<T*>(y.p), stats});
    });
  }
  run(ctx, op, rows * kRowLanes, SoftmaxLaneBody{scores, partial});
  run(ctx, op, rows, SoftmaxRowStatsBody{partial, stats});
  run(ctx, op, rows * cols, SoftmaxApplyBody{scores, y, stats});
}

}  // namespace

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "softmax_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  const int64_t cols = x.dim(-1);
  softmax_rows(ctx, op, {float_ptr(op, "x", x), nullptr, 1, cols}, float_ptr(op, "y", y), x.numel() / cols);
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  const char* op = "softmax_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx});
  const ScratchScope own_scratch(ctx);
  const int64_t cols = y.dim(-1), rows = y.numel() / cols;
  Tensor partial_t = ctx.scratch_tensor({rows * kRowLanes}, DType::f64);
  Tensor dot_t = ctx.scratch_tensor({rows}, DType::f64);
  double* partial = partial_t.ptr<double>();
  double* dot = dot_t.ptr<double>();
  const FloatPtr ys = float_ptr(op, "y", y), dys = float_ptr(op, "dy", dy), dxs = float_ptr(op, "dx", dx);
  if (spans_fit(ys, dys, nullptr, cols) && spans_fit(ys, dxs, nullptr, cols)) {
    return with_float_type(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *py = y.ptr<T>(), *pd = dy.ptr<T>();
      run(ctx, op, rows * SoftmaxBackwardLaneSpanBody<T>::kGroups, SoftmaxBackwardLaneSpanBody<T>{py, pd, cols, partial});
      run(ctx, op, rows, LaneSumBody{partial, dot});
      run(ctx, op, y.numel() / kSpanWidth<T>, SoftmaxBackwardApplySpanBody<T>{py, pd, dx.ptr<T>(), dot, cols, scale});
    });
  }
  run(ctx, op, rows * kRowLanes, SoftmaxBackwardLaneBody{ys, dys, cols, partial});
  run(ctx, op, rows, LaneSumBody{partial, dot});
  run(ctx, op, y.numel(), SoftmaxBackwardApplyBody{ys, dys, dxs, dot, cols, scale});
}

void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs) {
  const char* op = "attention_softmax_forward";
  const OpScope scope = expect_cuda(ctx, op, {&scores, &mask, &probs});
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
  attention_softmax_forward(ctx, scores, mask, probs);
  cuda::dropout_forward(ctx, probs, drop, dropped);
}

void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped) {
  const char* op = "attention_probs_backward";
  const OpScope scope = expect_cuda(ctx, op, {&probs, &dprobs, &dscores, &dropped, &drop.sample_offset});
  cuda::dropout_forward(ctx, probs, drop, dropped);
  cuda::dropout_backward(ctx, dprobs, drop, dprobs);
  softmax_backward(ctx, probs, dprobs, scale, dscores);
}

}  // namespace kiln::ops::cuda
