#include "kiln/backend/vocab_xent_check.h"

#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {

int64_t check_vocab_combine(const char* op, const Tensor& gathered, const Tensor& combined) {
  expect_dtype(op, "gathered partials", gathered, {DType::f32});
  expect_dtype(op, "combined", combined, {DType::f32});
  KILN_CHECK(gathered.rank() == 3 && gathered.dim(0) >= 1 && gathered.dim(2) == 3 && combined.rank() == 2 &&
                 combined.dim(0) == 3 && combined.dim(1) == gathered.dim(1),
             "op {}: partials {} (ranks, N, 3) and combined {} (3, N)", op, shape_str(gathered.shape),
             shape_str(combined.shape));
  return combined.dim(1);
}

int64_t check_vocab_totals(const char* op, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                           const Tensor& weights, const Tensor& lse, const Tensor& totals) {
  expect_dtype(op, "combined", combined, {DType::f32});
  expect_dtype(op, "sumexp", sumexp, {DType::f64});
  expect_dtype(op, "labels", labels, {DType::i32});
  expect_dtype(op, "lse", lse, {DType::f32});
  expect_dtype(op, "totals", totals, {DType::i64});
  KILN_CHECK(combined.rank() == 2 && combined.dim(0) == 3, "op {}: combined {} is not (3, N)", op,
             shape_str(combined.shape));
  const int64_t N = combined.dim(1);
  KILN_CHECK(sumexp.numel() == N && labels.numel() == N && lse.numel() == N && totals.numel() == 3,
             "op {}: {} rows need sumexp, labels and lse of {} and 3 totals, got {}, {}, {} and {}", op, N, N,
             sumexp.numel(), labels.numel(), lse.numel(), totals.numel());
  if (weights.defined()) {
    expect_dtype(op, "weights", weights, {DType::f32});
    KILN_CHECK(weights.numel() == N, "op {}: {} weights for {} rows", op, weights.numel(), N);
  }
  return N;
}

}  // namespace kiln::ops
