#include "kiln/nn/tanh.h"

#include "kiln/backend/backend.h"

namespace kiln::nn {

Tensor Tanh::forward(const Step& step, const Tensor& x) {
  y_view_ = y_.get(*step.ctx, x.shape, x.dtype);
  ops::tanh_forward(*step.ctx, x, y_view_);
  return y_view_;
}

Tensor Tanh::backward(const Step& step, const Tensor& dy) {
  Tensor dx = dx_.get(*step.ctx, dy.shape, dy.dtype);
  ops::tanh_backward(*step.ctx, y_view_, dy, dx);
  return dx;
}

}  // namespace kiln::nn
