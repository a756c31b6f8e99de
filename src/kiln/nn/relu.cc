#include "kiln/nn/relu.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Tensor Relu::forward(const Step& step, const Tensor& x) {
  y_ = out_.get(*step.ctx, x.shape, x.dtype);
  ops::relu_forward(*step.ctx, x, y_);
  return y_;
}

Tensor Relu::backward(const Step& step, const Tensor& dy) {
  KILN_CHECK(dy.shape == y_.shape && dy.dtype == y_.dtype,
             "Relu: gradient {} {} does not match output {} {}", dtype_name(dy.dtype),
             shape_str(dy.shape), dtype_name(y_.dtype), shape_str(y_.shape));
  Tensor dx = dx_.get(*step.ctx, dy.shape, dy.dtype);
  ops::relu_backward(*step.ctx, y_, dy, dx);
  return dx;
}

}  // namespace kiln::nn
