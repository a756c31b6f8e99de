#include "kiln/nn/pool.h"

#include "kiln/core/error.h"

namespace kiln::nn {

Tensor MaxPool2d::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() == 4, "MaxPool2d: input {} is not (N, H, W, C)", shape_str(x.shape));
  shape_ = ops::PoolShape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), kernel, kernel,
                          stride,   stride,   padding,  padding};
  KILN_CHECK(shape_.P() > 0 && shape_.Q() > 0, "MaxPool2d: input {} is too small for window {}",
             shape_str(x.shape), kernel);
  const Shape out{shape_.N, shape_.P(), shape_.Q(), shape_.C};
  Tensor y = y_.get(*step.ctx, out, x.dtype);
  Tensor argmax = argmax_.get(*step.ctx, out, DType::i32);
  ops::maxpool_forward(*step.ctx, shape_, x, y, argmax);
  x_dtype_ = x.dtype;
  return y;
}

Tensor MaxPool2d::backward(const Step& step, const Tensor& dy) {
  const Shape out{shape_.N, shape_.P(), shape_.Q(), shape_.C};
  KILN_CHECK(dy.shape == out && dy.dtype == x_dtype_,
             "MaxPool2d: gradient {} {} does not match output {} {}", dtype_name(dy.dtype),
             shape_str(dy.shape), dtype_name(x_dtype_), shape_str(out));
  Tensor dx = dx_.get(*step.ctx, {shape_.N, shape_.H, shape_.W, shape_.C}, dy.dtype);
  ops::maxpool_backward(*step.ctx, shape_, dy, argmax_.get(*step.ctx, out, DType::i32), dx);
  return dx;
}

Tensor GlobalAvgPool::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() == 4, "GlobalAvgPool: input {} is not (N, H, W, C)", shape_str(x.shape));
  x_shape_ = x.shape;
  x_dtype_ = x.dtype;
  Tensor y = y_.get(*step.ctx, {x.dim(0), x.dim(3)});
  ops::global_avgpool_forward(*step.ctx, x, y);
  return y;
}

Tensor GlobalAvgPool::backward(const Step& step, const Tensor& dy) {
  const int64_t N = x_shape_[0], C = x_shape_[3];
  KILN_CHECK(dy.rank() == 2 && dy.dim(0) == N && dy.dim(1) == C,
             "GlobalAvgPool: gradient {} is not ({}, {})", shape_str(dy.shape), N, C);
  Tensor dx = dx_.get(*step.ctx, x_shape_, x_dtype_);
  ops::global_avgpool_backward(*step.ctx, dy, dx);
  return dx;
}

}  // namespace kiln::nn
