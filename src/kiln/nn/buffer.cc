#include "kiln/nn/buffer.h"

namespace kiln::nn {

Tensor Buffer::get(const Shape& shape, DType dtype) {
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (bytes > capacity_ || !storage_.defined()) {
    storage_ = Tensor::empty({int64_t((bytes + 3) / 4)}, DType::f32);
    capacity_ = bytes;
  }
  Tensor t = storage_;
  t.shape = shape;
  t.dtype = dtype;
  return t;
}

}  // namespace kiln::nn
