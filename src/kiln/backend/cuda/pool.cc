// backend/cuda/pool.cc — max pooling and global average pooling on CUDA: checks, then the
// bodies of pool_bodies.h.
#include "kiln/backend/cuda/pool_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"

namespace kiln::ops::cuda {
namespace {

PoolGeometry geometry(const PoolShape& s) {
  return {s.N, s.H, s.W, s.C, s.R, s.S, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.P(), s.Q()};
}

}  // namespace

void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax) {
  const char* op = "maxpool_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &argmax});
  const PoolGeometry g = geometry(s);
  run(ctx, op, y.numel(),
      MaxPoolBody{g, float_ptr(op, "x", x), float_ptr(op, "y", y), argmax.ptr<int32_t>()});
}

void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx) {
  const char* op = "maxpool_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &argmax, &dx});
  const PoolGeometry g = geometry(s);
  run(ctx, op, dx.numel(),
      MaxPoolBackwardBody{g, float_ptr(op, "dy", dy), float_ptr(op, "dx", dx),
                          argmax.ptr<int32_t>()});
}

void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avgpool_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  const int64_t HW = x.dim(1) * x.dim(2);
  run(ctx, op, y.numel(),
      GlobalAvgPoolBody{float_ptr(op, "x", x), float_ptr(op, "y", y), HW, x.dim(3)});
}

void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avgpool_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &dx});
  const int64_t HW = dx.dim(1) * dx.dim(2);
  run(ctx, op, dx.numel(),
      GlobalAvgPoolBackwardBody{float_ptr(op, "dy", dy), float_ptr(op, "dx", dx), HW, dx.dim(3)});
}

}  // namespace kiln::ops::cuda
