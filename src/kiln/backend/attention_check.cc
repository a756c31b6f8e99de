// backend/attention_check.cc — the argument checks of fused attention (backend/checks.h), made once
// in the dispatch for both backends: the heads' views inside their tensors and of one shape and
// dtype, the head dim the tiles take, the mask, the row statistics and the dropout.
#include <cmath>

#include "kiln/backend/checks.h"
#include "kiln/backend/cuda/attention_tiles.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// A head view (S, d) with batch {B, heads} like q's, every element inside its tensor.
void check_heads(const char* op, const char* what, const MatView& v, const MatView& q) {
  KILN_CHECK(v.t.defined() && !v.trans && v.rows == q.rows && v.cols == q.cols && v.batch[0] == q.batch[0] &&
                 v.batch[1] == q.batch[1] && v.t.dtype == q.t.dtype,
             "op {}: {} ({} x {}, batch {}x{}, {}) is not like q ({} x {}, batch {}x{}, {})", op, what, v.rows,
             v.cols, v.batch[0], v.batch[1], dtype_name(v.t.dtype), q.rows, q.cols, q.batch[0], q.batch[1],
             dtype_name(q.t.dtype));
  KILN_CHECK(v.offset >= 0 && v.ld >= v.cols && v.batch_stride[0] >= 0 && v.batch_stride[1] >= 0,
             "op {}: {} view (ld {}) is malformed", op, what, v.ld);
  const int64_t last = v.offset + (v.batch[0] - 1) * v.batch_stride[0] + (v.batch[1] - 1) * v.batch_stride[1] +
                       (v.rows - 1) * v.ld + v.cols - 1;
  KILN_CHECK(last < v.t.numel(), "op {}: {} view reaches element {} of a tensor {}", op, what, last,
             shape_str(v.t.shape));
}

// q's shape (B, heads, S, d) against the mask, the row statistics, the scale and the dropout.
void check_attention(const char* op, const MatView& q, const Tensor& mask, const DropoutMask& drop, float scale,
                     const Tensor& row_lse, const Tensor& keep_bits) {
  const int64_t B = q.batch[0], heads = q.batch[1], S = q.rows, d = q.cols;
  expect_dtype(op, "q", q.t, kFloat);
  KILN_CHECK(S > 0 && d > 0 && d % 16 == 0 && d <= cuda::kFlashMaxHeadDim,
             "op {}: head dim {} is not a multiple of 16 up to {} (S {})", op, d, cuda::kFlashMaxHeadDim, S);
  expect_dtype(op, "mask", mask, {DType::i32});
  KILN_CHECK(mask.rank() == 2 && mask.dim(0) == B && mask.dim(1) == S, "op {}: mask {} is not (B {}, S {})", op,
             shape_str(mask.shape), B, S);
  expect_dtype(op, "row_lse", row_lse, {DType::f32});
  KILN_CHECK(row_lse.rank() == 3 && row_lse.dim(0) == B && row_lse.dim(1) == heads && row_lse.dim(2) == S,
             "op {}: row_lse {} is not (B {}, heads {}, S {})", op, shape_str(row_lse.shape), B, heads, S);
  KILN_CHECK(std::isfinite(scale), "op {}: scale {} is not finite", op, scale);
  if (drop.p != 0.0f) {
    KILN_CHECK(drop.samples == B, "op {}: the dropout has {} samples, the batch {}", op, drop.samples, B);
    expect_dropout_mask(op, drop, B * heads * S * S, S);
    expect_dtype(op, "keep_bits", keep_bits, {DType::i32});
    const Shape bits{B, heads, S, flash_keep_words(S)};
    KILN_CHECK(keep_bits.shape == bits, "op {}: keep_bits {} is not {} (B, heads, S, S / 32 words)", op,
               shape_str(keep_bits.shape), shape_str(bits));
  }
}

}  // namespace

void check_args(check::flash_attention_forward, const MatView& q, const MatView& k, const MatView& v,
                const Tensor& mask, const DropoutMask& drop, float scale, const MatView& context, Tensor& row_lse,
                Tensor& keep_bits) {
  const char* op = "flash_attention_forward";
  check_heads(op, "q", q, q);
  check_heads(op, "k", k, q);
  check_heads(op, "v", v, q);
  check_heads(op, "context", context, q);
  check_attention(op, q, mask, drop, scale, row_lse, keep_bits);
}

void check_args(check::flash_attention_backward, const MatView& q, const MatView& k, const MatView& v,
                const MatView& context, const MatView& dcontext, const Tensor& mask, const DropoutMask& drop,
                float scale, const Tensor& row_lse, const Tensor& keep_bits, const MatView& dq, const MatView& dk,
                const MatView& dv) {
  const char* op = "flash_attention_backward";
  check_heads(op, "q", q, q);
  check_heads(op, "k", k, q);
  check_heads(op, "v", v, q);
  check_heads(op, "context", context, q);
  check_heads(op, "dcontext", dcontext, q);
  check_heads(op, "dq", dq, q);
  check_heads(op, "dk", dk, q);
  check_heads(op, "dv", dv, q);
  check_attention(op, q, mask, drop, scale, row_lse, keep_bits);
}

}  // namespace kiln::ops
