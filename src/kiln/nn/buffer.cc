#include "kiln/nn/buffer.h"

#include "kiln/backend/backend.h"

namespace kiln::nn {

Tensor Buffer::get(const Context& ctx, const Shape& shape, DType dtype) {
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (bytes > capacity_ || !storage_.defined() || storage_.device != ctx.device) {
    storage_ = Tensor::empty({int64_t((bytes + 3) / 4)}, DType::f32, ctx.device);
    capacity_ = bytes;
  }
  Tensor t = storage_;
  t.shape = shape;
  t.dtype = dtype;
  return t;
}

Tensor Buffer::input(Context& ctx, const Tensor& host) {
  if (host.device == ctx.device) return host;
  Tensor t = get(ctx, host.shape, host.dtype);
  ops::copy(ctx, host, t);
  return t;
}

}  // namespace kiln::nn
