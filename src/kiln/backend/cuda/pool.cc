// backend/cuda/pool.cc — max pooling and global average pooling on CUDA: checks, then the
// bodies of pool_bodies.h.
#include "kiln/backend/cnn_check.h"
#include "kiln/backend/cuda/pool_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Throws unless x is the pool's input (N, H, W, C) and y its output (N, P, Q, C), of one dtype.
PoolGeometry check_pool(const char* op, const PoolShape& s, const Tensor& x, const Tensor& y) {
  KILN_CHECK(s.P() > 0 && s.Q() > 0, "op {}: input {}x{} is too small for window {}x{}", op, s.H,
             s.W, s.R, s.S);
  const Shape xs{s.N, s.H, s.W, s.C}, ys{s.N, s.P(), s.Q(), s.C};
  KILN_CHECK(x.shape == xs && y.shape == ys && x.dtype == y.dtype,
             "op {}: {} {} and {} {} are not the pool's input {} and output {} of one dtype", op,
             dtype_name(x.dtype), shape_str(x.shape), dtype_name(y.dtype), shape_str(y.shape),
             shape_str(xs), shape_str(ys));
  return {s.N, s.H, s.W, s.C, s.R, s.S, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.P(), s.Q()};
}

void check_argmax(const char* op, const Tensor& argmax, const Tensor& y) {
  expect_dtype(op, "argmax", argmax, {DType::i32});
  KILN_CHECK(argmax.shape == y.shape, "op {}: argmax {} does not match {}", op,
             shape_str(argmax.shape), shape_str(y.shape));
}

}  // namespace

void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax) {
  const char* op = "maxpool_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &argmax});
  const PoolGeometry g = check_pool(op, s, x, y);
  check_argmax(op, argmax, y);
  run(ctx, op, y.numel(),
      MaxPoolBody{g, float_ptr(op, "x", x), float_ptr(op, "y", y), argmax.ptr<int32_t>()});
}

void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx) {
  const char* op = "maxpool_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &argmax, &dx});
  const PoolGeometry g = check_pool(op, s, dx, dy);
  check_argmax(op, argmax, dy);
  run(ctx, op, dx.numel(),
      MaxPoolBackwardBody{g, float_ptr(op, "dy", dy), float_ptr(op, "dx", dx),
                          argmax.ptr<int32_t>()});
}

void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avgpool_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  const int64_t HW = check_avgpool(op, x, y);
  run(ctx, op, y.numel(),
      GlobalAvgPoolBody{float_ptr(op, "x", x), float_ptr(op, "y", y), HW, x.dim(3)});
}

void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avgpool_backward";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &dx});
  const int64_t HW = check_avgpool(op, dx, dy);
  run(ctx, op, dx.numel(),
      GlobalAvgPoolBackwardBody{float_ptr(op, "dy", dy), float_ptr(op, "dx", dx), HW, dx.dim(3)});
}

}  // namespace kiln::ops::cuda
