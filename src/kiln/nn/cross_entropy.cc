#include "kiln/nn/cross_entropy.h"

namespace kiln::nn {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, Context& ctx) {
  stage(ctx, labels, logits.dim(0));
  forward(logits);
  return read();
}

}  // namespace kiln::nn
