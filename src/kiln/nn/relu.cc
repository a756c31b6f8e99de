#include "kiln/nn/relu.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Tensor Relu::forward(const Step&, const Tensor& x) {
  y_ = out_.get(x.shape);
  ops::relu_forward(x.ptr<float>(), x.numel(), y_.ptr<float>());
  return y_;
}

Tensor Relu::backward(const Step&, const Tensor& dy) {
  KILN_CHECK(dy.shape == y_.shape, "Relu: gradient {} does not match output {}",
             shape_str(dy.shape), shape_str(y_.shape));
  Tensor dx = dx_.get(dy.shape);
  ops::relu_backward(y_.ptr<float>(), dy.ptr<float>(), dy.numel(), dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
