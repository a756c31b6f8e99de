// backend/xent_check.cc — the argument checks of the cross-entropies, softmax_xent (losses) and the
// vocab-parallel parts (vocab_xent) (backend/checks.h), made once in the dispatch for both backends.
// Whether each label is below V is the CPU kernel's check (backend/cpu/losses.cc): it reads the
// labels' values, which a replayed graph changes after the dispatch has run.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// weights (N) f32, or undefined.
void check_weights(const char* op, const Tensor& weights, int64_t N) {
  if (!weights.defined()) return;
  expect_dtype(op, "weights", weights, {DType::f32});
  KILN_CHECK(weights.numel() == N, "op {}: {} weights for {} rows", op, weights.numel(), N);
}

// logits (N, V) of a float dtype, labels (N) i32, lse (N) f32, weights (N) f32 or undefined.
void check_xent(const char* op, const Tensor& logits, const Tensor& labels, const Tensor& weights,
                const Tensor& lse) {
  KILN_CHECK(logits.rank() == 2, "op {}: logits {} are not (N, V)", op, shape_str(logits.shape));
  const int64_t N = logits.dim(0);
  expect_dtype(op, "labels", labels, {DType::i32});
  expect_dtype(op, "lse", lse, {DType::f32});
  KILN_CHECK(labels.numel() == N && lse.numel() == N,
             "op {}: logits {} need labels and lse of {} rows, got {} and {}", op,
             shape_str(logits.shape), N, labels.numel(), lse.numel());
  check_weights(op, weights, N);
  expect_dtype(op, "logits", logits, kFloat);
}

// A shard's logits (N, Vs) of a float dtype, labels (N) i32 and rows (N * row_width) values.
void check_shard(const char* op, const Tensor& logits, const Tensor& labels, const Tensor& rows,
                 int64_t row_width) {
  KILN_CHECK(logits.rank() == 2, "op {}: logits {} are not (N, V)", op, shape_str(logits.shape));
  expect_dtype(op, "labels", labels, {DType::i32});
  const int64_t N = logits.dim(0);
  KILN_CHECK(labels.numel() == N && rows.numel() == N * row_width,
             "op {}: logits {} need {} labels and {} x {} row values, got {} and {}", op,
             shape_str(logits.shape), N, N, row_width, labels.numel(), rows.numel());
  expect_dtype(op, "logits", logits, kFloat);
}

void check_dlogits(const char* op, const Tensor& logits, const Tensor& dlogits) {
  KILN_CHECK(dlogits.shape == logits.shape, "op {}: dlogits {} for logits {}", op, shape_str(dlogits.shape),
             shape_str(logits.shape));
  expect_dtype(op, "dlogits", dlogits, kFloat);
}

}  // namespace

void check_args(check::softmax_xent_forward, const Tensor& logits, const Tensor& labels, const Tensor& weights,
                float label_smoothing, Tensor& lse, Tensor& totals) {
  const char* op = "softmax_xent_forward";
  check_xent(op, logits, labels, weights, lse);
  expect_xent_totals(op, totals);
}

void check_args(check::softmax_xent_backward, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                const Tensor& weights, float label_smoothing, float scale, const Tensor& totals, XentNorm norm,
                Tensor& dlogits) {
  const char* op = "softmax_xent_backward";
  check_xent(op, logits, labels, weights, lse);
  expect_xent_totals(op, totals);
  check_dlogits(op, logits, dlogits);
}

void check_args(check::vocab_xent_partials, const Tensor& logits, const Tensor& labels, int64_t start,
                Tensor& partials) {
  const char* op = "vocab_xent_partials";
  check_shard(op, logits, labels, partials, 3);
  expect_dtype(op, "partials", partials, {DType::f32});
}

void check_args(check::vocab_xent_sumexp, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  const char* op = "vocab_xent_sumexp";
  KILN_CHECK(logits.rank() == 2 && max.numel() == logits.dim(0) && sumexp.numel() == logits.dim(0),
             "op {}: logits {}, max {}, sumexp {}", op, shape_str(logits.shape), shape_str(max.shape),
             shape_str(sumexp.shape));
  expect_dtype(op, "max", max, {DType::f32});
  expect_dtype(op, "sumexp", sumexp, {DType::f64});
  expect_dtype(op, "logits", logits, kFloat);
}

void check_args(check::vocab_xent_combine, const Tensor& gathered, Tensor& combined) {
  const char* op = "vocab_xent_combine";
  expect_dtype(op, "gathered partials", gathered, {DType::f32});
  expect_dtype(op, "combined", combined, {DType::f32});
  KILN_CHECK(gathered.rank() == 3 && gathered.dim(0) >= 1 && gathered.dim(2) == 3 && combined.rank() == 2 &&
                 combined.dim(0) == 3 && combined.dim(1) == gathered.dim(1),
             "op {}: partials {} (ranks, N, 3) and combined {} (3, N)", op, shape_str(gathered.shape),
             shape_str(combined.shape));
}

void check_args(check::vocab_xent_totals, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                const Tensor& weights, Tensor& lse, Tensor& totals) {
  const char* op = "vocab_xent_totals";
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
  check_weights(op, weights, N);
}

void check_args(check::vocab_xent_backward, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                const Tensor& weights, int64_t start, float scale, const Tensor& totals, XentNorm norm,
                Tensor& dlogits) {
  const char* op = "vocab_xent_backward";
  expect_xent_totals(op, totals);
  check_shard(op, logits, labels, lse, 1);
  expect_dtype(op, "lse", lse, {DType::f32});
  check_dlogits(op, logits, dlogits);
  check_weights(op, weights, logits.dim(0));
}

}  // namespace kiln::ops
