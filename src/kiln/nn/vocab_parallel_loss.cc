#include "kiln/nn/vocab_parallel_loss.h"

#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

LossResult VocabParallelMlmLoss::forward(Context& ctx, const Tensor& logits, int64_t start,
                                         const int32_t* ids, const float* weights) {
  KILN_CHECK(logits.rank() == 2 && logits.dtype == DType::f32,
             "vocab-parallel MLM loss: logits {} {} are not (N, V) f32", dtype_name(logits.dtype),
             shape_str(logits.shape));
  const int64_t N = logits.dim(0);
  ctx_ = &ctx;
  logits_ = logits;
  start_ = start;
  ids_.assign(ids, ids + N);
  weights_.assign(weights, weights + N);
  const Tensor labels = Tensor::view(ids_.data(), {N}, DType::i32);

  Tensor partials = partials_.get(ctx, {N, 3});
  ops::vocab_xent_partials(ctx, logits, labels, start, partials);
  Tensor all = gathered_.get(ctx, {int64_t(tp_.size), N, 3});
  if (tp_.split()) tp_.comm->all_gather(partials, all);
  else ops::copy(ctx, partials, all);
  // Per row: the global max, the first argmax (lowest rank among equal maxima: ranks hold
  // ascending vocab ranges) and the target's logit (held by one rank, 0 on the others).
  Tensor max = max_.get(ctx, {N});
  std::vector<float> argmax(static_cast<size_t>(N)), target(static_cast<size_t>(N), 0.0f);
  const float* g = all.ptr<float>();
  for (int64_t i = 0; i < N; ++i) {
    float m = g[3 * i];
    argmax[size_t(i)] = g[3 * i + 1];
    for (int r = 0; r < tp_.size; ++r) {
      const float* row = g + (r * N + i) * 3;
      if (row[0] > m) m = row[0], argmax[size_t(i)] = row[1];
      target[size_t(i)] += row[2];
    }
    max.ptr<float>()[i] = m;
  }
  Tensor sumexp = sumexp_.get(ctx, {N}, DType::f64);
  ops::vocab_xent_sumexp(ctx, logits, max, sumexp);
  tp_.all_reduce(sumexp);

  lse_.resize(size_t(N));
  double loss = 0, weight_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    lse_[size_t(i)] = float(double(max.ptr<float>()[i]) + std::log(sumexp.ptr<double>()[i]));
    if (ids_[size_t(i)] < 0) continue;
    const double w = weights_[size_t(i)];
    loss += w * (double(lse_[size_t(i)]) - double(target[size_t(i)]));
    weight_sum += w;
    correct += w > 0 && int64_t(argmax[size_t(i)]) == ids_[size_t(i)];
  }
  denom_ = weight_sum + 1e-5;
  return {loss / denom_, correct, weight_sum};
}

Tensor VocabParallelMlmLoss::backward(float dloss) {
  KILN_CHECK(ctx_, "vocab-parallel MLM loss: backward called before forward");
  const int64_t N = logits_.dim(0);
  Tensor d = dlogits_.get(*ctx_, logits_.shape);
  ops::vocab_xent_backward(*ctx_, logits_, Tensor::view(lse_.data(), {N}),
                           Tensor::view(ids_.data(), {N}, DType::i32),
                           Tensor::view(weights_.data(), {N}), start_, dloss, denom_, d);
  return d;
}

}  // namespace kiln::nn
