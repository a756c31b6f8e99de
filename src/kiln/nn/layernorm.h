// nn/layernorm.h — LayerNorm over the last dimension, statistics in fp32.
#pragma once
#include <string>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class LayerNorm {
 public:
  // Registers `prefix.weight` and `prefix.bias` (dim), both without decay.
  LayerNorm(ParamStore& store, const std::string& prefix, int64_t dim, float eps = 1e-12f);

  // x: (N, dim) -> y: (N, dim); keeps x and saves mean, rstd (N) for backward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, dim) -> dx: (N, dim); accumulates into weight.g() and bias.g().
  Tensor backward(const Step& step, const Tensor& dy);

  Param weight, bias;  // (dim) each
  int64_t dim;
  float eps;

 private:
  Tensor x_;
  Buffer y_, mean_, rstd_, dx_;
};

}  // namespace kiln::nn
