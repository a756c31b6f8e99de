// nn/buffer.h — a layer's reusable activation buffer: allocated on first use, grown only when
// a larger shape arrives, so steady-state forward/backward allocate nothing.
#pragma once
#include "kiln/core/tensor.h"

namespace kiln::nn {

class Buffer {
 public:
  // A tensor of `shape` over this buffer's storage; contents are unspecified.
  Tensor get(const Shape& shape, DType dtype = DType::f32);

 private:
  Tensor storage_;
  size_t capacity_ = 0;  // bytes
};

}  // namespace kiln::nn
