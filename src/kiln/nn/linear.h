// nn/linear.h — y = x W^T + b, Hugging Face layout: weight (out, in), bias (out).
#pragma once
#include <string>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Linear {
 public:
  // Registers `prefix.weight` (out, in) with decay and, if `bias`, `prefix.bias` (out) without.
  Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias = true);

  // x: (N, in) in the weights' compute dtype (or f32: then the f32 master weights are used)
  // -> y: (N, out) in x's dtype; the bias is added by the matmul. Keeps a handle to x for backward (x must stay unchanged until then).
  // The result lives in this layer's buffer until the next forward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, out) in x's dtype -> dx: (N, in); accumulates weight.grad() += dy^T x and
  // bias.grad() += sum dy in f32. The result lives in this layer's buffer until the next
  // backward.
  Tensor backward(const Step& step, const Tensor& dy);
  // backward() writing dx (N, in) into the caller's tensor, or adding to it when `accumulate`
  // (a residual or multi-branch gradient, summed by the matmul instead of an add pass).
  void backward_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate);

  Param weight, bias;  // bias.id == -1 when constructed without bias
  int64_t in, out;

 private:
  Tensor x_;
  Buffer y_, dx_;
};

}  // namespace kiln::nn
