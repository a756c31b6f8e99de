#include "kiln/nn/gelu.h"

namespace kiln::nn {

Tensor Gelu::forward(const Step& step, const Tensor& x) {
  x_ = x;
  Tensor y = y_.get(*step.ctx, x.shape, x.dtype);
  ops::gelu_forward(*step.ctx, kind, x, y);
  return y;
}

Tensor Gelu::backward(const Step& step, const Tensor& dy) {
  Tensor dx = dx_.get(*step.ctx, dy.shape, dy.dtype);
  ops::gelu_backward(*step.ctx, kind, x_, dy, dx);
  return dx;
}

}  // namespace kiln::nn
