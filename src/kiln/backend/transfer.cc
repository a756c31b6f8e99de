// backend/transfer.cc — whole tensors moved between the host and the context's device.
#include "kiln/backend/backend.h"
#include "kiln/backend/dispatch_cuda.h"

namespace kiln::ops {
namespace {

Tensor copied_to(Context& ctx, const Tensor& t, Device device) {
  if (t.device == device) return t;
  Tensor out = Tensor::empty(t.shape, t.dtype, device);
  copy(ctx, t, out);
  return out;
}

}  // namespace

Tensor on_device(Context& ctx, const Tensor& t) { return copied_to(ctx, t, ctx.device); }
Tensor on_host(Context& ctx, const Tensor& t) { return copied_to(ctx, t, Device::cpu()); }

void staged_copy(Context& ctx, const Tensor& host, Tensor& dst, HostStaging& staging) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "staged_copy", staged_copy(ctx, host, dst, staging));
  copy(ctx, host, dst);
}

// Page-locked on a CUDA context (its copies run asynchronously); plain host memory elsewhere.
Tensor host_staging_tensor(Context& ctx, const Shape& shape, DType dtype) {
#ifdef KILN_HAVE_CUDA
  if (on_cuda(ctx)) return cuda::pinned_host_tensor(shape, dtype);
#endif
  return Tensor::empty(shape, dtype);
}

}  // namespace kiln::ops
