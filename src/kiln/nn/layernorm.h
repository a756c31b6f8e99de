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

  // x: (N, dim) in the compute dtype -> y: (N, dim) in the same dtype; keeps x and saves
  // mean, rstd (N, f32) for backward.
  Tensor forward(const Step& step, const Tensor& x);
  // forward(a + b) in one pass, with the join a + b written to `sum` (the caller's residual
  // stream; kept as the input for backward).
  Tensor forward(const Step& step, const Tensor& a, const Tensor& b, Tensor& sum);
  // dy: (N, dim) -> dx: (N, dim); accumulates into weight.grad() and bias.grad() (f32).
  Tensor backward(const Step& step, const Tensor& dy);
  // backward() writing dx into the caller's tensor, or adding to it when `accumulate` (the
  // residual stream's gradient: no separate add pass).
  void backward_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate);
  // Its buffers over `owner`'s (nn::Buffer::share), for a layer never alive at the same time.
  // From now on backward adds the parameters' gradients to dw and db (f32, (dim) each) instead of
  // weight.grad() and bias.grad(); undefined tensors: to those again.
  void grads_into(const Tensor& dw, const Tensor& db) { dw_into_ = dw, db_into_ = db; }
  void share_storage(LayerNorm& owner) {
    y_.share(owner.y_), mean_.share(owner.mean_), rstd_.share(owner.rstd_), dx_.share(owner.dx_);
  }

  Param weight, bias;  // (dim) each
  int64_t dim;
  float eps;

 private:
  Tensor x_;
  Tensor dw_into_, db_into_;
  Buffer y_, mean_, rstd_, dx_;
};

}  // namespace kiln::nn
