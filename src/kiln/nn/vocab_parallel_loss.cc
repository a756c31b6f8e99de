#include "kiln/nn/vocab_parallel_loss.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

void VocabParallelMlmLoss::stage(Context& ctx, const int32_t* ids, const float* weights, int64_t N) {
  ctx_ = &ctx;
  labels_ = labels_buf_.copy_in(ctx, Tensor::view(const_cast<int32_t*>(ids), {N}, DType::i32));
  weights_ = weights_buf_.copy_in(ctx, Tensor::view(const_cast<float*>(weights), {N}));
}

LossResult VocabParallelMlmLoss::forward(Context& ctx, const Tensor& logits, int64_t start,
                                         const int32_t* ids, const float* weights) {
  stage(ctx, ids, weights, logits.dim(0));
  forward(logits, start);
  return read();
}

void VocabParallelMlmLoss::forward(const Tensor& logits, int64_t start) {
  KILN_CHECK(ctx_, "vocab-parallel MLM loss: forward called before stage");
  KILN_CHECK(logits.rank() == 2 && logits.dtype == DType::f32 && logits.dim(0) == labels_.numel(),
             "vocab-parallel MLM loss: logits {} {} are not (N, V) f32 for {} staged ids",
             dtype_name(logits.dtype), shape_str(logits.shape), labels_.numel());
  Context& ctx = *ctx_;
  const int64_t N = logits.dim(0);
  logits_ = logits;
  start_ = start;

  Tensor partials = partials_.get(ctx, {N, 3});
  ops::vocab_xent_partials(ctx, logits, labels_, start, partials);
  Tensor all = gathered_.get(ctx, {int64_t(tp_.size), N, 3});
  if (tp_.split()) tp_.comm->all_gather(partials, all);
  else ops::copy(ctx, partials, all);
  Tensor combined = combined_.get(ctx, {3, N});  // max, first argmax, label logit per row
  ops::vocab_xent_combine(ctx, all, combined);
  Tensor sumexp = sumexp_.get(ctx, {N}, DType::f64);
  ops::vocab_xent_sumexp(ctx, logits, combined.slice_rows(0, 1).reshape({N}), sumexp);
  tp_.all_reduce(sumexp);

  lse_ = lse_buf_.get(ctx, {N});
  totals_ = totals_buf_.get(ctx, {3}, DType::i64);
  ops::vocab_xent_totals(ctx, combined, sumexp, labels_, weights_, lse_, totals_);
}

LossResult VocabParallelMlmLoss::read() const {
  KILN_CHECK(totals_.defined(), "vocab-parallel MLM loss: read called before forward");
  return read_xent_totals(*ctx_, totals_, MlmLoss::kNorm);
}

Tensor VocabParallelMlmLoss::backward(float dloss, DType dtype) {
  KILN_CHECK(totals_.defined(), "vocab-parallel MLM loss: backward called before forward");
  Tensor d = dlogits_.get(*ctx_, logits_.shape, dtype);
  ops::vocab_xent_backward(*ctx_, logits_, lse_, labels_, weights_, start_, dloss, totals_, MlmLoss::kNorm, d);
  return d;
}

}  // namespace kiln::nn
