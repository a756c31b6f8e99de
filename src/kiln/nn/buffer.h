// nn/buffer.h — a layer's reusable activation buffer: allocated on first use, grown only when
// a larger shape arrives, so steady-state forward/backward allocate nothing.
#pragma once
#include "kiln/core/context.h"
#include "kiln/core/tensor.h"

namespace kiln::nn {

class Buffer {
 public:
  // A tensor of `shape` on ctx.device over this buffer's storage; contents are unspecified.
  Tensor get(const Context& ctx, const Shape& shape, DType dtype = DType::f32);
  // A host tensor (a batch's ids, labels or images) as an operand on ctx.device: `host` itself
  // when that is the host, else its copy in this buffer.
  Tensor input(Context& ctx, const Tensor& host);

 private:
  Tensor storage_;
  size_t capacity_ = 0;  // bytes
};

}  // namespace kiln::nn
