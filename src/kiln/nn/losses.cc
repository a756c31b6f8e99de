#include "kiln/nn/losses.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

LossResult MlmLoss::forward(const Tensor& logits, const int32_t* ids, const float* weights) {
  KILN_CHECK(logits.rank() == 2, "MlmLoss: logits {} are not (N, V)", shape_str(logits.shape));
  const int64_t N = logits.dim(0), V = logits.dim(1);
  for (int64_t i = 0; i < N; ++i)
    KILN_CHECK(ids[i] >= 0 && ids[i] < V, "MlmLoss: label {} at slot {} is outside [0, {})",
               ids[i], i, V);
  logits_ = logits;
  ids_.assign(ids, ids + N);
  float* lse = lse_.get({N}).ptr<float>();
  int32_t* argmax = argmax_.get({N}, DType::i32).ptr<int32_t>();
  ops::logsumexp_rows(logits.ptr<float>(), N, V, lse, argmax);

  LossResult r;
  double nll = 0;
  for (int64_t i = 0; i < N; ++i) {
    r.count += weights[i];
    nll -= double(weights[i]) * (double(logits.ptr<float>()[i * V + ids[i]]) - double(lse[i]));
    if (weights[i] > 0 && argmax[i] == ids[i]) ++r.correct;
  }
  const double denom = r.count + 1e-5;
  r.loss = nll / denom;
  coef_.resize(size_t(N));
  for (int64_t i = 0; i < N; ++i) coef_[i] = float(double(weights[i]) / denom);
  return r;
}

Tensor MlmLoss::backward(float dloss) {
  const int64_t N = logits_.dim(0), V = logits_.dim(1);
  Tensor d = dlogits_.get({N, V});
  ops::softmax_xent_backward(logits_.ptr<float>(), lse_.get({N}).ptr<float>(), ids_.data(),
                             coef_.data(), dloss, N, V, d.ptr<float>());
  return d;
}

LossResult NspLoss::forward(const Tensor& logits, const int32_t* labels) {
  KILN_CHECK(logits.rank() == 2, "NspLoss: logits {} are not (B, C)", shape_str(logits.shape));
  const int64_t B = logits.dim(0), C = logits.dim(1);
  for (int64_t i = 0; i < B; ++i)
    KILN_CHECK(labels[i] >= -1 && labels[i] < C, "NspLoss: label {} at row {} is outside [-1, {})",
               labels[i], i, C);
  logits_ = logits;
  labels_.assign(labels, labels + B);
  float* lse = lse_.get({B}).ptr<float>();
  int32_t* argmax = argmax_.get({B}, DType::i32).ptr<int32_t>();
  ops::logsumexp_rows(logits.ptr<float>(), B, C, lse, argmax);

  LossResult r;
  double nll = 0;
  for (int64_t i = 0; i < B; ++i) {
    if (labels[i] < 0) continue;
    r.count += 1;
    nll -= double(logits.ptr<float>()[i * C + labels[i]]) - double(lse[i]);
    if (argmax[i] == labels[i]) ++r.correct;
  }
  r.loss = r.count > 0 ? nll / r.count : 0.0;
  coef_.resize(size_t(B));
  for (int64_t i = 0; i < B; ++i) coef_[i] = labels[i] < 0 ? 0.0f : float(1.0 / r.count);
  return r;
}

Tensor NspLoss::backward(float dloss) {
  const int64_t B = logits_.dim(0), C = logits_.dim(1);
  Tensor d = dlogits_.get({B, C});
  ops::softmax_xent_backward(logits_.ptr<float>(), lse_.get({B}).ptr<float>(), labels_.data(),
                             coef_.data(), dloss, B, C, d.ptr<float>());
  return d;
}

}  // namespace kiln::nn
