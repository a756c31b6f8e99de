#include "kiln/nn/pool.h"

#include "kiln/core/error.h"

namespace kiln::nn {

Tensor MaxPool2d::forward(const Step&, const Tensor& x) {
  KILN_CHECK(x.rank() == 4, "MaxPool2d: input {} is not (N, H, W, C)", shape_str(x.shape));
  shape_ = ops::PoolShape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), kernel, kernel,
                          stride,   stride,   padding,  padding};
  const Shape out{shape_.N, shape_.P(), shape_.Q(), shape_.C};
  Tensor y = y_.get(out);
  ops::maxpool_forward(shape_, x.ptr<float>(), y.ptr<float>(),
                       argmax_.get(out, DType::i32).ptr<int32_t>());
  return y;
}

Tensor MaxPool2d::backward(const Step&, const Tensor& dy) {
  const Shape out{shape_.N, shape_.P(), shape_.Q(), shape_.C};
  KILN_CHECK(dy.shape == out, "MaxPool2d: gradient {} does not match output {}",
             shape_str(dy.shape), shape_str(out));
  Tensor dx = dx_.get({shape_.N, shape_.H, shape_.W, shape_.C});
  ops::maxpool_backward(shape_, dy.ptr<float>(), argmax_.get(out, DType::i32).ptr<int32_t>(),
                        dx.ptr<float>());
  return dx;
}

Tensor GlobalAvgPool::forward(const Step&, const Tensor& x) {
  KILN_CHECK(x.rank() == 4, "GlobalAvgPool: input {} is not (N, H, W, C)", shape_str(x.shape));
  x_shape_ = x.shape;
  Tensor y = y_.get({x.dim(0), x.dim(3)});
  ops::global_avgpool_forward(x.ptr<float>(), x.dim(0), x.dim(1) * x.dim(2), x.dim(3),
                              y.ptr<float>());
  return y;
}

Tensor GlobalAvgPool::backward(const Step&, const Tensor& dy) {
  const int64_t N = x_shape_[0], C = x_shape_[3];
  KILN_CHECK(dy.rank() == 2 && dy.dim(0) == N && dy.dim(1) == C,
             "GlobalAvgPool: gradient {} is not ({}, {})", shape_str(dy.shape), N, C);
  Tensor dx = dx_.get(x_shape_);
  ops::global_avgpool_backward(dy.ptr<float>(), N, x_shape_[1] * x_shape_[2], C, dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
