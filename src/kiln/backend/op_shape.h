// backend/op_shape.h — what KILN_PROFILE's per-(op, shape) rows say about an op (profile.h's
// OpShape), made by the dispatch (backend/dispatch.cc) from the op's arguments while the profile
// records. Any op: its tensors' dtypes and shapes, and the bytes they hold, each read or written
// once. Matrix products and convolutions: their dimensions and FLOPs instead.
#pragma once
#include "kiln/backend/checks.h"
#include "kiln/backend/profile.h"

namespace kiln::ops {

// Adds a defined tensor operand's "bf16[8192,1024]" and its bytes; other arguments add nothing.
void add_operand(OpShape& shape, const Tensor& t);
template <typename T>
void add_operand(OpShape&, const T&) {}

template <typename Op, typename... Args>
OpShape describe(Op, const Args&... args) {
  OpShape shape;
  (add_operand(shape, args), ...);
  return shape;
}

// "[16x16] 512x512x64 bf16->f32 +bias": batch, M x N x K, operand and result dtypes; 2 M N K
// FLOPs per matrix; a, b and c's bytes (c twice when accumulated into).
OpShape describe(check::matmul, const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& opts);
// "[16x16] S512 d64 bf16 p0.1": batch x heads, sequence, head dim, dtype, dropout; forward 4 d Z
// FLOPs of products (Z = B heads S^2), backward 14 d Z (the scores twice, dp twice, dv, dk, dq); the
// head views' bytes once each, the mask, the row statistics and (with dropout) the keep bits.
OpShape describe(check::flash_attention_forward, const MatView& q, const MatView& k, const MatView& v,
                 const Tensor& mask, const DropoutMask& drop, float scale, const MatView& context,
                 const Tensor& row_lse, const Tensor& keep_bits);
OpShape describe(check::flash_attention_backward, const MatView& q, const MatView& k, const MatView& v,
                 const MatView& context, const MatView& dcontext, const Tensor& mask, const DropoutMask& drop,
                 float scale, const Tensor& row_lse, const Tensor& keep_bits, const MatView& dq, const MatView& dk,
                 const MatView& dv);
// "32x56x56x64 k64 3x3/1 bf16": N x H x W x C, output channels, kernel / stride, dtype; the
// forward's 2 N P Q K C/groups R S FLOPs (the same for either backward pass); the tensors' bytes.
OpShape describe(check::conv2d_forward, const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& y);
OpShape describe(check::conv2d_backward_data, const ConvShape& s, const Tensor& dy, const Tensor& w,
                 const Tensor& dx);
OpShape describe(check::conv2d_backward_weights, const ConvShape& s, const Tensor& x, const Tensor& dy,
                 const Tensor& dw, bool accumulate);

}  // namespace kiln::ops
