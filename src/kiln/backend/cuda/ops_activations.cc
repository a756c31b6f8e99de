// backend/cuda/ops_activations.cc — tanh, ReLU, the residual joins, bias add and bias gradient
// on CUDA: checks, then a body of bodies.h / bodies_rows.h on the context's stream.
#include "kiln/backend/cuda/bodies.h"
#include "kiln/backend/cuda/bodies_rows.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Rows of y (N, C) for a bias of C = bias.numel().
int64_t rows_of(const char* op, const Tensor& y, const Tensor& bias) {
  const int64_t C = bias.numel();
  KILN_CHECK(y.rank() >= 1 && C > 0 && y.dim(-1) == C, "op {}: {} does not end in {} columns",
             op, shape_str(y.shape), C);
  return y.numel() / C;
}

}  // namespace

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "tanh_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  expect_same_numel(op, x, y);
  run(ctx, op, y.numel(), TanhForwardBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "tanh_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx});
  expect_same_numel(op, y, dx);
  expect_same_numel(op, dy, dx);
  run(ctx, op, dx.numel(),
      TanhBackwardBody{float_ptr(op, "y", y), float_ptr(op, "dy", dy), float_ptr(op, "dx", dx)});
}

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "relu_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  expect_like(op, x, {&y});
  run(ctx, op, y.numel(), ReluForwardBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  const char* op = "relu_backward";
  const OpScope scope = expect_cuda(ctx, op, {&y, &dy, &dx, &dy2});
  expect_like(op, y, {&dy, &dx});
  FloatPtr second;  // null: none
  if (dy2.defined()) {
    expect_like(op, y, {&dy2});
    second = float_ptr(op, "dy2", dy2);
  }
  run(ctx, op, dx.numel(),
      ReluBackwardBody{float_ptr(op, "y", y), float_ptr(op, "dy", dy), float_ptr(op, "dx", dx), second});
}

void residual_add(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "residual_add";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y});
  expect_like(op, x, {&y});
  run(ctx, op, y.numel(), AccumulateBody{float_ptr(op, "x", x), float_ptr(op, "y", y)});
}

void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  const char* op = "bias_add";
  const OpScope scope = expect_cuda(ctx, op, {&y, &bias});
  rows_of(op, y, bias);
  run(ctx, op, y.numel(),
      BiasAddBody{float_ptr(op, "y", y), float_ptr(op, "bias", bias), bias.numel()});
}

void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  const char* op = "bias_grad";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &db});
  expect_dtype(op, "db", db, {DType::f32});
  const int64_t N = rows_of(op, dy, db), C = db.numel(), chunks = (N + kBiasGradRows - 1) / kBiasGradRows;
  if (chunks == 0) return;
  const ScratchScope own_scratch(ctx);
  Tensor partial = ctx.scratch_tensor({chunks * C}, DType::f64);
  run(ctx, op, chunks * C, BiasGradChunkBody{float_ptr(op, "dy", dy), partial.ptr<double>(), N, C});
  run(ctx, op, C, BiasGradCombineBody{partial.ptr<double>(), db.ptr<float>(), chunks, C});
}

}  // namespace kiln::ops::cuda
