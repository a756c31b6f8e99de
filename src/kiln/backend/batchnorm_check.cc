// backend/batchnorm_check.cc — the argument checks of batch norm's ops (backend/checks.h), made once
// in the dispatch for both backends.
#include <initializer_list>

#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// x (rows, C) of a float dtype with C > 0, y of x's shape and dtype, the channel vectors f32 (C).
void check_bn(const char* op, const Tensor& x, const Tensor& y, std::initializer_list<const Tensor*> channel_vectors) {
  KILN_CHECK(x.rank() >= 1, "op {}: input has no channel dimension", op);
  KILN_CHECK(x.dim(-1) > 0, "op {}: input {} has no channels", op, shape_str(x.shape));
  const int64_t C = x.dim(-1);
  KILN_CHECK(y.shape == x.shape, "op {}: output {} does not match input {}", op, shape_str(y.shape),
             shape_str(x.shape));
  KILN_CHECK(y.dtype == x.dtype, "op {}: dtypes {} and {} differ", op, dtype_name(x.dtype), dtype_name(y.dtype));
  expect_dtype(op, "x", x, kFloat);
  for (const Tensor* t : channel_vectors) {
    expect_dtype(op, "channel vector", *t, {DType::f32});
    KILN_CHECK(t->numel() == C, "op {}: channel vector {} does not match {} channels", op, shape_str(t->shape), C);
  }
}

// A defined residual has x's shape and dtype.
void check_residual(const char* op, const Tensor& residual, const Tensor& x) {
  if (!residual.defined()) return;
  KILN_CHECK(residual.shape == x.shape && residual.dtype == x.dtype,
             "op {}: residual {} {} does not match input {} {}", op, dtype_name(residual.dtype),
             shape_str(residual.shape), dtype_name(x.dtype), shape_str(x.shape));
}

// x with rows, and the f64 channel vectors of the SyncBN steps (C each).
void check_sums(const char* op, const Tensor& x, std::initializer_list<const Tensor*> sums) {
  KILN_CHECK(x.rank() >= 1 && x.numel() > 0, "op {}: input {} is empty", op, shape_str(x.shape));
  expect_dtype(op, "x", x, kFloat);
  const int64_t C = x.dim(-1);
  for (const Tensor* t : sums) {
    expect_dtype(op, "channel sums", *t, {DType::f64});
    KILN_CHECK(t->numel() == C, "op {}: channel sums {} do not match {} channels", op, shape_str(t->shape), C);
  }
}

// The backward's f64 sums: 2 per channel of x.
void check_backward_sums(const char* op, const Tensor& x, std::initializer_list<const Tensor*> sums) {
  const int64_t C = x.dim(-1);
  for (const Tensor* t : sums) {
    expect_dtype(op, "sums", *t, {DType::f64});
    KILN_CHECK(t->numel() == 2 * C, "op {}: sums {} are not 2 x {} channels", op, shape_str(t->shape), C);
  }
}

void check_total_rows(const char* op, const Tensor& x, int64_t total_rows) {
  const int64_t rows = x.numel() / x.dim(-1);
  KILN_CHECK(total_rows >= rows, "op {}: {} total rows, fewer than the {} here", op, total_rows, rows);
}

}  // namespace

void check_args(check::batchnorm_train_forward, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                float eps, bool relu, Tensor& y, Tensor& mean, Tensor& var, const Tensor& residual) {
  const char* op = "batchnorm_train_forward";
  check_bn(op, x, y, {&gamma, &beta, &mean, &var});
  KILN_CHECK(x.numel() > 0, "op batchnorm_train_forward: input {} is empty", shape_str(x.shape));
  check_residual(op, residual, x);
}

void check_args(check::batchnorm_eval_forward, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                const Tensor& mean, const Tensor& var, float eps, bool relu, Tensor& y,
                const Tensor& residual) {
  const char* op = "batchnorm_eval_forward";
  check_bn(op, x, y, {&gamma, &beta, &mean, &var});
  check_residual(op, residual, x);
}

void check_args(check::batchnorm_backward, const Tensor& x, const Tensor& y, const Tensor& dy,
                const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  check_bn(op, x, y, {&gamma, &mean, &var, &dgamma, &dbeta});
  check_bn(op, x, dy, {});
  check_bn(op, x, dx, {});
}

void check_args(check::batchnorm_channel_sums, const Tensor& x, Tensor& sum) {
  check_sums("batchnorm_channel_sums", x, {&sum});
}

void check_args(check::batchnorm_channel_deviations, const Tensor& x, const Tensor& sum, int64_t total_rows,
                Tensor& squares) {
  const char* op = "batchnorm_channel_deviations";
  check_sums(op, x, {&sum, &squares});
  check_total_rows(op, x, total_rows);
}

void check_args(check::batchnorm_stats_from_sums, const Tensor& sum, const Tensor& squares, int64_t rows,
                Tensor& mean, Tensor& var) {
  const char* op = "batchnorm_stats_from_sums";
  expect_dtype(op, "sum", sum, {DType::f64});
  expect_dtype(op, "squares", squares, {DType::f64});
  expect_dtype(op, "mean", mean, {DType::f32});
  expect_dtype(op, "var", var, {DType::f32});
  const int64_t C = sum.numel();
  KILN_CHECK(squares.numel() == C && mean.numel() == C && var.numel() == C && rows > 0,
             "op {}: {} channels, {} rows: shapes {} {} {}", op, C, rows, shape_str(squares.shape),
             shape_str(mean.shape), shape_str(var.shape));
}

void check_args(check::batchnorm_backward_sums, const Tensor& x, const Tensor& y, const Tensor& dy,
                const Tensor& mean, bool relu, Tensor& sums) {
  const char* op = "batchnorm_backward_sums";
  check_bn(op, x, y, {&mean});
  check_bn(op, x, dy, {});
  check_backward_sums(op, x, {&sums});
}

void check_args(check::batchnorm_backward_from_sums, const Tensor& x, const Tensor& y, const Tensor& dy,
                const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward_from_sums";
  check_bn(op, x, y, {&gamma, &mean, &var, &dgamma, &dbeta});
  check_bn(op, x, dy, {});
  check_bn(op, x, dx, {});
  check_backward_sums(op, x, {&local_sums, &global_sums});
  check_total_rows(op, x, total_rows);
}

void check_args(check::batchnorm_update_running, const Tensor& mean, const Tensor& var, int64_t rows,
                float momentum, Tensor& running_mean, Tensor& running_var, Tensor& num_batches_tracked) {
  const char* op = "batchnorm_update_running";
  const Tensor* statistics[] = {&mean, &var, &running_mean, &running_var, &num_batches_tracked};
  for (const Tensor* t : statistics) expect_dtype(op, "statistic", *t, {DType::f32});
  const int64_t C = mean.numel();
  KILN_CHECK(var.numel() == C && running_mean.numel() == C && running_var.numel() == C &&
                 num_batches_tracked.numel() == 1,
             "op {}: statistics {} {} {} {} do not match {} channels and one counter", op,
             shape_str(var.shape), shape_str(running_mean.shape), shape_str(running_var.shape),
             shape_str(num_batches_tracked.shape), C);
  KILN_CHECK(rows > 1, "op {}: an unbiased variance needs more than one row, got {}", op, rows);
}

}  // namespace kiln::ops
