// nn/pool.h — MaxPool2d (PyTorch semantics: padding never wins) and global average pooling over
// NHWC activations.
#pragma once
#include "kiln/backend/backend.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class MaxPool2d {
 public:
  MaxPool2d(int64_t kernel = 3, int64_t stride = 2, int64_t padding = 1)
      : kernel(kernel), stride(stride), padding(padding) {}

  // x: (N, H, W, C) -> y: (N, P, Q, C), same dtype; saves the argmax of each output for
  // backward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, P, Q, C) -> dx: (N, H, W, C).
  Tensor backward(const Step& step, const Tensor& dy);
  // Writes backward's dx into `dx` (shared with other layers) instead of its own buffer.
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }

  int64_t out_size(int64_t in) const { return (in + 2 * padding - kernel) / stride + 1; }

  int64_t kernel, stride, padding;

 private:
  ops::PoolShape shape_;
  DType x_dtype_ = DType::f32;
  Buffer y_, argmax_;
  BufferSlot dx_;
};

class GlobalAvgPool {
 public:
  // x: (N, H, W, C) in any float dtype -> y: (N, C) f32 (the classifier head runs in f32).
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, C) in any float dtype -> dx: (N, H, W, C) in the dtype of the forward's x.
  Tensor backward(const Step& step, const Tensor& dy);
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }  // as MaxPool2d's

 private:
  Shape x_shape_;
  DType x_dtype_ = DType::f32;
  Buffer y_;
  BufferSlot dx_;
};

}  // namespace kiln::nn
