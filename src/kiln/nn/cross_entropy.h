// nn/cross_entropy.h — softmax cross-entropy with label smoothing (PyTorch's
// F.cross_entropy(label_smoothing=ls, ignore_index=-1)): the target is (1-ls)·onehot + ls/C, and
// the loss is the mean over rows whose label is not -1 (padding rows of the last eval batch).
// The work is ops::softmax_xent_forward/backward; the layer reads back three numbers.
#pragma once
#include <cstdint>

#include "kiln/core/tensor.h"
#include "kiln/nn/losses.h"

namespace kiln::nn {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(float label_smoothing = 0.1f) : label_smoothing(label_smoothing) {}

  // logits: (N, C) f32, labels: (N) in [0, C) or -1 (loaders validate them; one >= C throws
  // kiln::Error). Returns the loss, top-1 correct count and non-ignored row count. Keeps a
  // handle to logits.
  LossResult forward(const Tensor& logits, const int32_t* labels, Context& ctx = cpu_context());
  // -> dlogits (N, C) = dloss · d(loss)/d(logits); ignored rows get 0.
  Tensor backward(float dloss);

  float label_smoothing;

 private:
  SoftmaxXentState xent_;
  double count_ = 0;
};

}  // namespace kiln::nn
