#include "kiln/nn/gelu.h"

namespace kiln::nn {

Tensor Gelu::forward(const Step&, const Tensor& x) {
  x_ = x;
  Tensor y = y_.get(x.shape);
  ops::gelu_forward(kind, x.ptr<float>(), x.numel(), y.ptr<float>());
  return y;
}

Tensor Gelu::backward(const Step&, const Tensor& dy) {
  Tensor dx = dx_.get(dy.shape);
  ops::gelu_backward(kind, x_.ptr<float>(), dy.ptr<float>(), dy.numel(), dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
