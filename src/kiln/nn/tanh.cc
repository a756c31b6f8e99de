#include "kiln/nn/tanh.h"

#include "kiln/backend/backend.h"

namespace kiln::nn {

Tensor Tanh::forward(const Step&, const Tensor& x) {
  y_view_ = y_.get(x.shape);
  ops::tanh_forward(x.ptr<float>(), x.numel(), y_view_.ptr<float>());
  return y_view_;
}

Tensor Tanh::backward(const Step&, const Tensor& dy) {
  Tensor dx = dx_.get(dy.shape);
  ops::tanh_backward(y_view_.ptr<float>(), dy.ptr<float>(), dy.numel(), dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
