// nn/conv2d.h — 2-D convolution over NHWC activations with PyTorch-layout weights, so checkpoints
// hold torchvision's (out, in/groups, kh, kw) tensors.
#pragma once
#include <string>

#include "kiln/backend/backend.h"
#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

struct Conv2dOptions {
  int64_t in = 1, out = 1;
  int64_t kernel = 1, stride = 1, padding = 0, dilation = 1, groups = 1;  // square
  bool bias = false;
};

// The convolution `opt` makes of N images of H x W, and its forward FLOPs (2 per multiply-add)
// for one image.
ops::ConvShape conv2d_shape(const Conv2dOptions& opt, int64_t N, int64_t H, int64_t W);
int64_t conv2d_flops(const Conv2dOptions& opt, int64_t H, int64_t W);

class Conv2d {
 public:
  // Registers `prefix.weight` (out, in/groups, kernel, kernel) with decay and, with opt.bias,
  // `prefix.bias` (out) without.
  Conv2d(ParamStore& store, const std::string& prefix, const Conv2dOptions& opt);

  // x: (N, H, W, in) in step.compute_dtype -> y: (N, P, Q, out), same dtype, with the weights
  // of weight.compute(). Keeps a handle to x (unchanged until backward). The result lives in
  // this layer's buffer until the next forward. A bias needs compute dtype f32.
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, P, Q, out) -> dx: (N, H, W, in) in dy's dtype, or an undefined tensor when
  // !need_dx (the stem: saves a backward-data pass). Accumulates into the f32 weight.grad()
  // and bias.grad().
  Tensor backward(const Step& step, const Tensor& dy, bool need_dx = true);

  // Writes backward's dx into `dx` (shared with other layers) instead of its own buffer.
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }

  ops::ConvShape shape(int64_t N, int64_t H, int64_t W) const { return conv2d_shape(opt, N, H, W); }
  int64_t flops(int64_t H, int64_t W) const { return conv2d_flops(opt, H, W); }

  Param weight, bias;  // bias.id == -1 without bias
  Conv2dOptions opt;

 private:
  Tensor x_;
  ops::ConvShape shape_;
  Buffer y_;
  BufferSlot dx_;
};

}  // namespace kiln::nn
