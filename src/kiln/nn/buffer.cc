#include "kiln/nn/buffer.h"

#include "kiln/backend/backend.h"
#include "kiln/nn/grad_loan.h"

namespace kiln::nn {

Tensor Buffer::get(const Context& ctx, const Shape& shape, DType dtype) {
  if (owner_) return owner_->get(ctx, shape, dtype);
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (bytes > capacity_ || !storage_.defined() || storage_.device != ctx.device) {
    storage_ = LoanScope::take(bytes, ctx.device);
    if (!storage_.defined()) storage_ = Tensor::empty({int64_t((bytes + 3) / 4)}, DType::f32, ctx.device);
    capacity_ = bytes;
  }
  Tensor t = storage_;
  t.shape = shape;
  t.dtype = dtype;
  return t;
}

Tensor Buffer::input(Context& ctx, const Tensor& host) {
  return host.device == ctx.device ? host : copy_in(ctx, host);
}

Tensor Buffer::copy_in(Context& ctx, const Tensor& host) {
  Tensor t = get(ctx, host.shape, host.dtype);
  ops::staged_copy(ctx, host, t, staging_);
  return t;
}

}  // namespace kiln::nn
