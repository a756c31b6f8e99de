#include "kiln/nn/losses.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

SoftmaxXentState::Totals SoftmaxXentState::forward(Context& ctx, const Tensor& logits,
                                                   const int32_t* labels, const float* weights,
                                                   float label_smoothing) {
  KILN_CHECK(logits.rank() == 2, "softmax cross-entropy: logits {} are not (N, V)",
             shape_str(logits.shape));
  const int64_t N = logits.dim(0);
  ctx_ = &ctx;
  label_smoothing_ = label_smoothing;
  logits_ = logits;
  labels_ = labels_buf_.get(ctx, {N}, DType::i32);
  ops::copy(ctx, Tensor::view(const_cast<int32_t*>(labels), {N}, DType::i32), labels_);
  weights_ = Tensor{};
  if (weights) {
    weights_ = weights_buf_.get(ctx, {N});
    ops::copy(ctx, Tensor::view(const_cast<float*>(weights), {N}), weights_);
  }
  lse_ = lse_buf_.get(ctx, {N});
  Tensor totals = totals_buf_.get(ctx, {3}, DType::i64);
  ops::softmax_xent_forward(ctx, logits_, labels_, weights_, label_smoothing, lse_, totals);
  return read_totals(ctx, totals);
}

SoftmaxXentState::Totals SoftmaxXentState::read_totals(Context& ctx, const Tensor& totals) {
  double host[3];
  Tensor host_view = Tensor::view(host, {3}, DType::i64);
  ops::copy(ctx, totals, host_view);
  return {host[0], host[1], int64_t(host[2])};
}

Tensor SoftmaxXentState::backward(float scale, double norm) {
  KILN_CHECK(ctx_, "softmax cross-entropy: backward called before forward");
  Tensor d = dlogits_buf_.get(*ctx_, logits_.shape);
  ops::softmax_xent_backward(*ctx_, logits_, lse_, labels_, weights_, label_smoothing_, scale,
                             norm, d);
  return d;
}

LossResult MlmLoss::forward(const Tensor& logits, const int32_t* ids, const float* weights,
                            Context& ctx) {
  const SoftmaxXentState::Totals t = xent_.forward(ctx, logits, ids, weights, 0.0f);
  denom_ = t.weight_sum + 1e-5;
  return {t.loss_sum / denom_, t.correct, t.weight_sum};
}

Tensor MlmLoss::backward(float dloss) { return xent_.backward(dloss, denom_); }

LossResult NspLoss::forward(const Tensor& logits, const int32_t* labels, Context& ctx) {
  const SoftmaxXentState::Totals t = xent_.forward(ctx, logits, labels, nullptr, 0.0f);
  count_ = t.weight_sum;
  return {count_ > 0 ? t.loss_sum / count_ : 0.0, t.correct, count_};
}

// Ignored rows (and every row when none counts) get a zero gradient.
Tensor NspLoss::backward(float dloss) { return xent_.backward(dloss, count_ > 0 ? count_ : 1.0); }

}  // namespace kiln::nn
