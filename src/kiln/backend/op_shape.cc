#include "kiln/backend/op_shape.h"

#include <fmt/format.h>

#include "kiln/backend/matmul_check.h"

namespace kiln::ops {
namespace {

OpShape conv_shape(const ConvShape& s, DType dtype, std::initializer_list<const Tensor*> operands) {
  OpShape shape;
  shape.text = fmt::format("{}x{}x{}x{} k{} {}x{}/{} {}", s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride_h,
                           dtype_name(dtype));
  if (s.groups != 1) shape.text += fmt::format(" g{}", s.groups);
  shape.flops = 2.0 * double(s.N * s.P() * s.Q() * s.K) * double(s.C / s.groups * s.R * s.S);
  for (const Tensor* t : operands) shape.bytes += double(t->nbytes());
  return shape;
}

// Fused attention over q's shape: `views` head views of q's size, `products` x 2 d Z FLOPs.
OpShape attention_shape(const MatView& q, const Tensor& mask, const DropoutMask& drop, const Tensor& row_lse,
                        const Tensor& keep_bits, int views, int products) {
  const double B = double(q.batch[0]), heads = double(q.batch[1]), S = double(q.rows), d = double(q.cols);
  OpShape shape;
  shape.text = fmt::format("[{}x{}] S{} d{} {}", q.batch[0], q.batch[1], q.rows, q.cols, dtype_name(q.t.dtype));
  if (drop.p != 0.0f) shape.text += fmt::format(" p{}", drop.p);
  shape.flops = products * 2.0 * B * heads * S * S * d;
  shape.bytes = views * B * heads * S * d * double(dtype_size(q.t.dtype)) + double(mask.nbytes() + row_lse.nbytes());
  if (drop.p != 0.0f) shape.bytes += double(keep_bits.nbytes());
  return shape;
}

}  // namespace

void add_operand(OpShape& shape, const Tensor& t) {
  if (!t.defined()) return;  // an optional operand left out
  if (!shape.text.empty()) shape.text += ' ';
  shape.text += dtype_name(t.dtype);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    shape.text += d ? ',' : '[';
    shape.text += std::to_string(t.shape[d]);
  }
  shape.text += t.shape.empty() ? "[]" : "]";
  shape.bytes += double(t.nbytes());
}

OpShape describe(check::matmul, const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& opts) {
  const int64_t M = op_rows(a), K = op_cols(a), N = op_cols(b), batch = c.batch[0] * c.batch[1];
  OpShape shape;
  if (batch != 1) shape.text = fmt::format("[{}x{}] ", c.batch[0], c.batch[1]);
  shape.text += fmt::format("{}x{}x{} {}->{}", M, N, K, dtype_name(a.t.dtype), dtype_name(c.t.dtype));
  if (opts.bias) shape.text += " +bias";
  if (opts.bias_grad) shape.text += " +bias_grad";
  shape.flops = 2.0 * double(batch) * double(M) * double(N) * double(K);
  const double c_passes = opts.beta != 0.0f ? 2.0 : 1.0;
  shape.bytes = double(batch) * (double(M * K + K * N) * double(dtype_size(a.t.dtype)) +
                                 c_passes * double(M * N) * double(dtype_size(c.t.dtype)));
  return shape;
}

OpShape describe(check::flash_attention_forward, const MatView& q, const MatView&, const MatView&,
                 const Tensor& mask, const DropoutMask& drop, float, const MatView&, const Tensor& row_lse,
                 const Tensor& keep_bits) {
  return attention_shape(q, mask, drop, row_lse, keep_bits, 4, 2);
}

OpShape describe(check::flash_attention_backward, const MatView& q, const MatView&, const MatView&, const MatView&,
                 const MatView&, const Tensor& mask, const DropoutMask& drop, float, const Tensor& row_lse,
                 const Tensor& keep_bits, const MatView&, const MatView&, const MatView&) {
  return attention_shape(q, mask, drop, row_lse, keep_bits, 8, 7);
}

OpShape describe(check::conv2d_forward, const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& y) {
  return conv_shape(s, x.dtype, {&x, &w, &y});
}

OpShape describe(check::conv2d_backward_data, const ConvShape& s, const Tensor& dy, const Tensor& w,
                 const Tensor& dx) {
  return conv_shape(s, dy.dtype, {&dy, &w, &dx});
}

OpShape describe(check::conv2d_backward_weights, const ConvShape& s, const Tensor& x, const Tensor& dy,
                 const Tensor& dw, bool accumulate) {
  OpShape shape = conv_shape(s, x.dtype, {&x, &dy, &dw});
  if (accumulate) shape.bytes += double(dw.nbytes());
  return shape;
}

}  // namespace kiln::ops
