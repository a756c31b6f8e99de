// nn/relu.h — y = max(x, 0). (ResNet fuses its ReLUs into BatchNorm2d and the residual join;
// this layer is for everything else.)
#pragma once
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Relu {
 public:
  // x: any shape and float dtype -> y: same shape and dtype, in this layer's buffer; y is kept
  // for backward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy -> dx = dy where y > 0, else 0.
  Tensor backward(const Step& step, const Tensor& dy);

 private:
  Tensor y_;
  Buffer out_, dx_;
};

}  // namespace kiln::nn
