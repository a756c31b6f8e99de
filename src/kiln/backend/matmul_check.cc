// backend/matmul_check.cc — matmul's argument check (backend/checks.h), made once in the dispatch
// for both backends: views reaching outside their tensors, mismatched shapes, batches or dtypes,
// unsupported option combinations.
#include "kiln/backend/matmul_check.h"

#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

// Checks that every element the view addresses lies inside its tensor.
void check_view(const MatView& v, const char* what) {
  KILN_CHECK(v.t.defined(), "op matmul: {} has no data", what);
  KILN_CHECK(v.rows >= 0 && v.cols >= 0 && v.batch[0] >= 1 && v.batch[1] >= 1 && v.offset >= 0 &&
                 v.batch_stride[0] >= 0 && v.batch_stride[1] >= 0 && (v.rows <= 1 || v.ld >= v.cols),
             "op matmul: {} view ({} x {}, ld {}) is malformed", what, v.rows, v.cols, v.ld);
  if (v.rows == 0 || v.cols == 0) return;
  const int64_t last = v.offset + (v.batch[0] - 1) * v.batch_stride[0] +
                       (v.batch[1] - 1) * v.batch_stride[1] + (v.rows - 1) * v.ld + v.cols - 1;
  KILN_CHECK(last < v.t.numel(), "op matmul: {} view reaches element {} of a tensor {}", what,
             last, shape_str(v.t.shape));
}

// The bias gradient rides a linear layer's weight-gradient product: a is dy (K, M) read
// transposed, whole, so that its column sums are the bias gradient's. Batched (q, k and v's weight
// gradients in one call): a's batches are whole consecutive dy's, and batch b's sums go to element
// b * bias_batch_stride of the bias gradient.
void check_bias_grad(const MatView& a, const MatView& c, const MatmulOpts& opts) {
  const Tensor& db = *opts.bias_grad;
  const int64_t dy = a.rows * a.cols, count = c.batch[0];
  KILN_CHECK(a.trans && a.offset == 0 && a.ld == a.cols && c.batch[1] == 1 && count * dy == a.t.numel() &&
                 (count == 1 || (opts.bias_batch_stride != 0 && a.batch_stride[0] == dy)),
             "op matmul: a bias gradient needs A = a whole (K, M) dy read transposed (batched: one dy after "
             "another, each with its own bias gradient)");
  const int64_t stride = opts.bias_batch_stride;
  KILN_CHECK(db.dtype == DType::f32 && (stride == 0 || stride >= a.cols) &&
                 db.numel() == (count - 1) * stride + a.cols,
             "op matmul: bias gradient {} {} for {} batches of {} rows at stride {}", dtype_name(db.dtype),
             shape_str(db.shape), count, a.cols, stride);
  KILN_CHECK(!opts.bias && opts.act == Activation::none && opts.alpha == 1.0f,
             "op matmul: a bias gradient with a bias, an activation or alpha != 1 is not supported");
}

}  // namespace

void* element(const MatView& v) {
  return static_cast<std::byte*>(v.t.data) + v.offset * int64_t(dtype_size(v.t.dtype));
}

void check_args(check::matmul, const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& opts) {
  check_view(a, "A");
  check_view(b, "B");
  check_view(c, "C");
  const int64_t M = op_rows(a), K = op_cols(a), N = op_cols(b);
  KILN_CHECK(op_rows(b) == K && !c.trans && c.rows == M && c.cols == N,
             "op matmul: ({} x {}) times ({} x {}) into ({} x {}{})", M, K, op_rows(b), N, c.rows,
             c.cols, c.trans ? ", transposed" : "");
  for (int i = 0; i < 2; ++i)
    KILN_CHECK(a.batch[i] == c.batch[i] && b.batch[i] == c.batch[i],
               "op matmul: batch sizes {}x{}, {}x{}, {}x{} differ", a.batch[0], a.batch[1],
               b.batch[0], b.batch[1], c.batch[0], c.batch[1]);
  KILN_CHECK(a.t.dtype == b.t.dtype, "op matmul: operands are {} and {}", dtype_name(a.t.dtype),
             dtype_name(b.t.dtype));
  expect_dtype("matmul", "A", a.t, {DType::f32, DType::bf16, DType::f16});
  KILN_CHECK(c.t.dtype == DType::f32 || c.t.dtype == a.t.dtype,
             "op matmul: output {} is neither f32 nor the operands' {}", dtype_name(c.t.dtype),
             dtype_name(a.t.dtype));
  if (opts.bias && opts.bias_batch_stride != 0) {
    const int64_t span = (c.batch[0] - 1) * opts.bias_batch_stride + N;
    KILN_CHECK(c.batch[1] == 1 && opts.bias_batch_stride >= N && opts.bias->numel() == span &&
                   (opts.bias->dtype == DType::f32 || opts.bias->dtype == c.t.dtype),
               "op matmul: biases {} {} at stride {} for {} batches of {} columns into {}",
               dtype_name(opts.bias->dtype), shape_str(opts.bias->shape), opts.bias_batch_stride, c.batch[0], N,
               dtype_name(c.t.dtype));
  } else if (opts.bias) {
    KILN_CHECK(opts.bias->numel() == N &&
                   (opts.bias->dtype == DType::f32 || opts.bias->dtype == a.t.dtype),
               "op matmul: bias {} {} for {} columns of {} operands",
               dtype_name(opts.bias->dtype), shape_str(opts.bias->shape), N,
               dtype_name(a.t.dtype));
  }
  KILN_CHECK(opts.bias_batch_stride == 0 || opts.bias || opts.bias_grad,
             "op matmul: a bias batch stride without a bias or a bias gradient");
  // No caller scales a biased product (oneDNN 2.x would scale the bias with it).
  KILN_CHECK(!opts.bias || opts.alpha == 1.0f, "op matmul: alpha != 1 with a bias is not supported");
  KILN_CHECK(opts.act == Activation::none || opts.beta == 0.0f,
             "op matmul: an activation with beta != 0 is not defined");
  if (opts.bias_grad) check_bias_grad(a, c, opts);
  // With no products, neither backend adds a bias or applies an activation (c = beta c).
  KILN_CHECK(M == 0 || N == 0 || K > 0 || (!opts.bias && opts.act == Activation::none),
             "op matmul: K = 0 with bias or activation");
}

}  // namespace kiln::ops
