#include "kiln/nn/losses.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

void SoftmaxXentState::stage(Context& ctx, const int32_t* labels, const float* weights, int64_t N) {
  ctx_ = &ctx;
  labels_ = labels_buf_.copy_in(ctx, Tensor::view(const_cast<int32_t*>(labels), {N}, DType::i32));
  weights_ = weights ? weights_buf_.copy_in(ctx, Tensor::view(const_cast<float*>(weights), {N})) : Tensor{};
}

void SoftmaxXentState::forward(const Tensor& logits, float label_smoothing) {
  KILN_CHECK(ctx_, "softmax cross-entropy: forward called before stage");
  KILN_CHECK(logits.rank() == 2 && logits.dim(0) == labels_.numel(),
             "softmax cross-entropy: logits {} for {} staged labels", shape_str(logits.shape), labels_.numel());
  label_smoothing_ = label_smoothing;
  logits_ = logits;
  lse_ = lse_buf_.get(*ctx_, {logits.dim(0)});
  totals_ = totals_buf_.get(*ctx_, {3}, DType::i64);
  ops::softmax_xent_forward(*ctx_, logits_, labels_, weights_, label_smoothing, lse_, totals_);
}

LossResult SoftmaxXentState::forward(Context& ctx, const Tensor& logits, const int32_t* labels,
                                     const float* weights, float label_smoothing) {
  stage(ctx, labels, weights, logits.dim(0));
  forward(logits, label_smoothing);
  return read();
}

LossResult xent_result(const double* totals, ops::XentNorm norm) {
  return {totals[0] / norm.divisor(totals), int64_t(totals[2]), totals[1]};
}

LossResult read_xent_totals(Context& ctx, const Tensor& totals, ops::XentNorm norm) {
  double host[3];
  Tensor host_view = Tensor::view(host, {3}, DType::i64);
  ops::copy(ctx, totals, host_view);
  return xent_result(host, norm);
}

LossResult SoftmaxXentState::read() const {
  KILN_CHECK(totals_.defined(), "softmax cross-entropy: read called before forward");
  return read(totals_);
}

LossResult SoftmaxXentState::read(const Tensor& totals) const {
  KILN_CHECK(ctx_, "softmax cross-entropy: read called before stage");
  return read_xent_totals(*ctx_, totals, norm_);
}

Tensor SoftmaxXentState::backward(float scale, DType dtype) {
  KILN_CHECK(totals_.defined(), "softmax cross-entropy: backward called before forward");
  Tensor d = dlogits_buf_.get(*ctx_, logits_.shape, dtype);
  ops::softmax_xent_backward(*ctx_, logits_, lse_, labels_, weights_, label_smoothing_, scale, totals_, norm_, d);
  return d;
}

}  // namespace kiln::nn
