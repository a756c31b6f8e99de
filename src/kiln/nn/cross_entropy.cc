#include "kiln/nn/cross_entropy.h"

namespace kiln::nn {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels,
                                        Context& ctx) {
  const SoftmaxXentState::Totals t = xent_.forward(ctx, logits, labels, nullptr, label_smoothing);
  count_ = t.weight_sum;
  return {count_ > 0 ? t.loss_sum / count_ : 0.0, t.correct, count_};
}

// The row coefficient dloss / count is rounded to f32 once (norm 1), as PyTorch's mean does.
Tensor SoftmaxCrossEntropy::backward(float dloss) {
  const float k = count_ > 0 ? float(double(dloss) / count_) : 0.0f;
  return xent_.backward(k, 1.0);
}

}  // namespace kiln::nn
