// nn/tanh.h — tanh activation (the BERT pooler).
#pragma once
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Tanh {
 public:
  // x: any shape and float dtype -> y: same shape and dtype; keeps y for backward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy -> dx = dy * (1 - y^2).
  Tensor backward(const Step& step, const Tensor& dy);

 private:
  Tensor y_view_;
  Buffer y_, dx_;
};

}  // namespace kiln::nn
