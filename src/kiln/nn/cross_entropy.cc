#include "kiln/nn/cross_entropy.h"

#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels) {
  KILN_CHECK(logits.rank() == 2, "SoftmaxCrossEntropy: logits {} are not (N, C)",
             shape_str(logits.shape));
  const int64_t N = logits.dim(0), C = logits.dim(1);
  for (int64_t i = 0; i < N; ++i)
    KILN_CHECK(labels[i] >= -1 && labels[i] < C,
               "SoftmaxCrossEntropy: label {} at row {} is outside [-1, {})", labels[i], i, C);
  logits_ = logits;
  labels_.assign(labels, labels + N);
  float* lse = lse_.get({N}).ptr<float>();
  int32_t* argmax = argmax_.get({N}, DType::i32).ptr<int32_t>();
  ops::logsumexp_rows(logits.ptr<float>(), N, C, lse, argmax);

  const double ls = label_smoothing;
  LossResult r;
  double total = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (labels[i] < 0) continue;
    const float* z = logits.ptr<float>() + i * C;
    double zsum = 0;
    for (int64_t c = 0; c < C; ++c) zsum += z[c];
    // -Σ_c q_c log p_c with q = (1-ls)·onehot + ls/C and log p_c = z_c - lse.
    total += double(lse[i]) - (1.0 - ls) * double(z[labels[i]]) - ls * zsum / double(C);
    r.count += 1;
    if (argmax[i] == labels[i]) ++r.correct;
  }
  count_ = r.count;
  r.loss = r.count > 0 ? total / r.count : 0.0;
  return r;
}

Tensor SoftmaxCrossEntropy::backward(float dloss) {
  const int64_t N = logits_.dim(0), C = logits_.dim(1);
  Tensor d = dlogits_.get({N, C});
  const float* lse = lse_.get({N}).ptr<float>();
  const float k = count_ > 0 ? float(double(dloss) / count_) : 0.0f;
  const float smooth = label_smoothing / float(C);
#pragma omp parallel for schedule(static) if (N * C > 8192)
  for (int64_t i = 0; i < N; ++i) {
    const float* z = logits_.ptr<float>() + i * C;
    float* dz = d.ptr<float>() + i * C;
    if (labels_[i] < 0) {
      for (int64_t c = 0; c < C; ++c) dz[c] = 0.0f;
      continue;
    }
    // dz = k·(softmax(z) - q).
    for (int64_t c = 0; c < C; ++c) dz[c] = k * (std::exp(z[c] - lse[i]) - smooth);
    dz[labels_[i]] -= k * (1.0f - label_smoothing);
  }
  return d;
}

}  // namespace kiln::nn
