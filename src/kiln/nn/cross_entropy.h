// nn/cross_entropy.h — softmax cross-entropy with label smoothing (PyTorch's
// F.cross_entropy(label_smoothing=ls, ignore_index=-1)): the target is (1-ls)·onehot + ls/C, and
// the loss is the mean over rows whose label is not -1 (padding rows of the last eval batch).
// The work is ops::softmax_xent_forward/backward; in parts as nn/losses.h says.
#pragma once
#include <cstdint>

#include "kiln/core/tensor.h"
#include "kiln/nn/losses.h"

namespace kiln::nn {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(float label_smoothing = 0.1f) : label_smoothing(label_smoothing) {}

  // labels: (N) in [0, C) or -1 (loaders validate them; one >= C throws kiln::Error).
  void stage(Context& ctx, const int32_t* labels, int64_t N) { xent_.stage(ctx, labels, nullptr, N); }
  // logits: (N, C) f32; keeps a handle to them.
  void forward(const Tensor& logits) { xent_.forward(logits, label_smoothing); }
  // The loss, top-1 correct count and non-ignored row count of the last forward.
  LossResult read() const { return xent_.read(); }
  // The same from a copy of totals() (3), and the last forward's totals on the device.
  LossResult read(const Tensor& totals) const { return xent_.read(totals); }
  const Tensor& totals() const { return xent_.totals(); }
  LossResult forward(const Tensor& logits, const int32_t* labels, Context& ctx = cpu_context()) {
    return xent_.forward(ctx, logits, labels, nullptr, label_smoothing);
  }
  // -> dlogits (N, C) = dloss · d(loss)/d(logits); ignored rows get 0. The row coefficient
  // dloss / count is rounded to f32 once, as PyTorch's mean does.
  Tensor backward(float dloss) { return xent_.backward(dloss); }

  float label_smoothing;

 private:
  SoftmaxXentState xent_{NspLoss::kNorm};  // a mean over the counted rows
};

}  // namespace kiln::nn
