// backend/cuda/batchnorm.cc — batch norm (training, eval, backward, the SyncBN steps and the
// running statistics) on CUDA: checks, then the bodies of batchnorm_bodies.h.
#include <algorithm>

#include "kiln/backend/cnn_check.h"
#include "kiln/backend/cuda/batchnorm_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Rows of x (rows, C); y has x's shape and dtype; the channel vectors are f32 (C).
int64_t check_bn(const char* op, const Tensor& x, const Tensor& y,
                 std::initializer_list<const Tensor*> channel_vectors) {
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) > 0, "op {}: input {} has no channels", op,
             shape_str(x.shape));
  const int64_t C = x.dim(-1);
  KILN_CHECK(y.shape == x.shape && y.dtype == x.dtype, "op {}: {} {} does not match input {} {}",
             op, dtype_name(y.dtype), shape_str(y.shape), dtype_name(x.dtype), shape_str(x.shape));
  for (const Tensor* t : channel_vectors) {
    expect_dtype(op, "channel vector", *t, {DType::f32});
    KILN_CHECK(t->numel() == C, "op {}: channel vector {} does not match {} channels", op,
               shape_str(t->shape), C);
  }
  return x.numel() / C;
}

// Throws unless every tensor is f64 with `per_channel` values per channel of x.
void check_sums(const char* op, const Tensor& x, int64_t per_channel,
                std::initializer_list<const Tensor*> sums) {
  for (const Tensor* t : sums) {
    expect_dtype(op, "channel sums", *t, {DType::f64});
    KILN_CHECK(t->numel() == per_channel * x.dim(-1), "op {}: channel sums {} are not {} x {}", op,
               shape_str(t->shape), per_channel, x.dim(-1));
  }
}

// One channel pass over x (batchnorm_bodies.h: runs, chunks, combine) into out (K * C doubles).
void channel_pass(Context& ctx, const char* op, BnRunBody body, double* out) {
  const ScratchScope own_scratch(ctx);
  const BnCuts cuts = bn_cuts(body.rows);
  const int64_t width = bn_sums_per_channel(body.what) * body.C;
  Tensor runs = ctx.scratch_tensor({std::max<int64_t>(1, cuts.runs() * width)}, DType::f32);
  Tensor partial = ctx.scratch_tensor({std::max<int64_t>(1, cuts.chunks * width)}, DType::f64);
  body.runs = runs.ptr<float>();
  run(ctx, op, cuts.runs() * body.C, body);
  run(ctx, op, cuts.chunks * width, BnChunkBody{runs.ptr<float>(), cuts, width, partial.ptr<double>()});
  run(ctx, op, width, BnCombineBody{partial.ptr<double>(), cuts.chunks, width, out});
}

BnRunBody pass(BnSum what, const char* op, const Tensor& x, int64_t rows) {
  return {what, float_ptr(op, "x", x), {}, {}, nullptr, nullptr, rows, x.dim(-1), rows, false,
          nullptr};
}

// y = max?(x a + b + residual?) per channel with the coefficients of gamma, beta, mean and var.
void normalize(Context& ctx, const char* op, const Tensor& x, const Tensor& gamma,
               const Tensor& beta, const Tensor& mean, const Tensor& var, float eps, bool relu,
               const Tensor& residual, Tensor& y) {
  FloatPtr r;  // null: no residual
  if (residual.defined()) {
    check_bn(op, x, residual, {});
    r = float_ptr(op, "residual", residual);
  }
  const int64_t C = x.dim(-1);
  Tensor coef = ctx.scratch_tensor({2, C}, DType::f32);
  float* a = coef.ptr<float>();
  run(ctx, op, C,
      BnForwardCoefBody{gamma.ptr<float>(), beta.ptr<float>(), mean.ptr<float>(), var.ptr<float>(),
                        eps, a, a + C});
  run(ctx, op, x.numel(), BnNormalizeBody{float_ptr(op, "x", x), float_ptr(op, "y", y), r, a, a + C, C, relu});
}

struct BackwardArgs {
  const Tensor *x, *y, *dy, *gamma, *mean, *var;
  float eps;
  bool relu, training;
  const double *local, *global;
  int64_t total_rows;
};

void backward_from(Context& ctx, const char* op, const BackwardArgs& a, Tensor& dx, Tensor& dgamma,
                   Tensor& dbeta) {
  const int64_t C = a.x->dim(-1);
  Tensor coef = ctx.scratch_tensor({3, C}, DType::f32);
  run(ctx, op, C,
      BnBackwardCoefBody{a.gamma->ptr<float>(), a.var->ptr<float>(), a.eps, a.training, a.local,
                         a.global, C, a.total_rows, dgamma.ptr<float>(), dbeta.ptr<float>(),
                         coef.ptr<float>()});
  run(ctx, op, dx.numel(),
      BnBackwardDxBody{float_ptr(op, "x", *a.x), float_ptr(op, "y", *a.y),
                       float_ptr(op, "dy", *a.dy), float_ptr(op, "dx", dx), a.mean->ptr<float>(),
                       coef.ptr<float>(), C, a.relu});
}

void backward_sums(Context& ctx, const char* op, const Tensor& x, const Tensor& y,
                   const Tensor& dy, const Tensor& mean, bool relu, int64_t rows, double* out) {
  BnRunBody body = pass(BnSum::backward, op, x, rows);
  body.y = float_ptr(op, "y", y);
  body.dy = float_ptr(op, "dy", dy);
  body.mean = mean.ptr<float>();
  body.relu = relu;
  channel_pass(ctx, op, body, out);
}

}  // namespace

void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var, const Tensor& residual) {
  const char* op = "batchnorm_train_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &gamma, &beta, &y, &mean, &var, &residual});
  const int64_t rows = check_bn(op, x, y, {&gamma, &beta, &mean, &var});
  KILN_CHECK(rows > 0, "op {}: input {} is empty", op, shape_str(x.shape));
  const int64_t C = x.dim(-1);
  Tensor sums = ctx.scratch_tensor({2, C}, DType::f64), shift = ctx.scratch_tensor({C}, DType::f32);
  run(ctx, op, C, BnShiftBody{float_ptr(op, "x", x), rows, C, shift.ptr<float>()});
  BnRunBody shifted = pass(BnSum::shifted, op, x, rows);
  shifted.mean = shift.ptr<float>();
  channel_pass(ctx, op, shifted, sums.ptr<double>());
  run(ctx, op, C,
      BnShiftedStatsBody{shift.ptr<float>(), sums.ptr<double>(), rows, C, mean.ptr<float>(), var.ptr<float>()});
  normalize(ctx, op, x, gamma, beta, mean, var, eps, relu, residual, y);
}

void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y, const Tensor& residual) {
  const char* op = "batchnorm_eval_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &gamma, &beta, &mean, &var, &y, &residual});
  check_bn(op, x, y, {&gamma, &beta, &mean, &var});
  normalize(ctx, op, x, gamma, beta, mean, var, eps, relu, residual, y);
}

void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  const OpScope scope =
      expect_cuda(ctx, op, {&x, &y, &dy, &gamma, &mean, &var, &dx, &dgamma, &dbeta});
  const int64_t rows = check_bn(op, x, y, {&gamma, &mean, &var, &dgamma, &dbeta});
  check_bn(op, x, dy, {});
  check_bn(op, x, dx, {});
  Tensor sums = ctx.scratch_tensor({2, x.dim(-1)}, DType::f64);
  backward_sums(ctx, op, x, y, dy, mean, relu, rows, sums.ptr<double>());
  backward_from(ctx, op,
                {&x, &y, &dy, &gamma, &mean, &var, eps, relu, training, sums.ptr<double>(),
                 sums.ptr<double>(), rows},
                dx, dgamma, dbeta);
}

void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum) {
  const char* op = "batchnorm_channel_sums";
  const OpScope scope = expect_cuda(ctx, op, {&x, &sum});
  const int64_t rows = check_bn(op, x, x, {});
  check_sums(op, x, 1, {&sum});
  channel_pass(ctx, op, pass(BnSum::x, op, x, rows), sum.ptr<double>());
}

void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum,
                                  int64_t total_rows, Tensor& squares) {
  const char* op = "batchnorm_channel_deviations";
  const OpScope scope = expect_cuda(ctx, op, {&x, &sum, &squares});
  const int64_t rows = check_bn(op, x, x, {});
  check_sums(op, x, 1, {&sum, &squares});
  KILN_CHECK(total_rows >= rows, "op {}: {} total rows, fewer than the {} here", op, total_rows,
             rows);
  BnRunBody dev = pass(BnSum::deviations, op, x, rows);
  dev.sum = sum.ptr<double>();
  dev.total_rows = total_rows;
  channel_pass(ctx, op, dev, squares.ptr<double>());
}

void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares,
                               int64_t rows, Tensor& mean, Tensor& var) {
  const char* op = "batchnorm_stats_from_sums";
  const OpScope scope = expect_cuda(ctx, op, {&sum, &squares, &mean, &var});
  const int64_t C = sum.numel();
  for (const Tensor* t : {&sum, &squares}) expect_dtype(op, "sums", *t, {DType::f64});
  for (const Tensor* t : {&mean, &var}) expect_dtype(op, "statistic", *t, {DType::f32});
  KILN_CHECK(squares.numel() == C && mean.numel() == C && var.numel() == C && rows > 0,
             "op {}: {} channels, {} rows: shapes {} {} {}", op, C, rows,
             shape_str(squares.shape), shape_str(mean.shape), shape_str(var.shape));
  run(ctx, op, C,
      BnStatsBody{sum.ptr<double>(), squares.ptr<double>(), rows, mean.ptr<float>(),
                  var.ptr<float>()});
}

void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                             const Tensor& mean, bool relu, Tensor& sums) {
  const char* op = "batchnorm_backward_sums";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &dy, &mean, &sums});
  const int64_t rows = check_bn(op, x, y, {&mean});
  check_bn(op, x, dy, {});
  check_sums(op, x, 2, {&sums});
  backward_sums(ctx, op, x, y, dy, mean, relu, rows, sums.ptr<double>());
}

void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                  const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums,
                                  int64_t total_rows, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward_from_sums";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &dy, &gamma, &mean, &var, &local_sums,
                                              &global_sums, &dx, &dgamma, &dbeta});
  const int64_t rows = check_bn(op, x, y, {&gamma, &mean, &var, &dgamma, &dbeta});
  check_bn(op, x, dy, {});
  check_bn(op, x, dx, {});
  check_sums(op, x, 2, {&local_sums, &global_sums});
  KILN_CHECK(total_rows >= rows, "op {}: {} total rows, fewer than the {} here", op, total_rows,
             rows);
  backward_from(ctx, op,
                {&x, &y, &dy, &gamma, &mean, &var, eps, relu, true, local_sums.ptr<double>(),
                 global_sums.ptr<double>(), total_rows},
                dx, dgamma, dbeta);
}

void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked) {
  const char* op = "batchnorm_update_running";
  const OpScope scope =
      expect_cuda(ctx, op, {&mean, &var, &running_mean, &running_var, &num_batches_tracked});
  const int64_t C = check_running_update(op, mean, var, rows, running_mean, running_var, num_batches_tracked);
  const float unbias = float(double(rows) / double(rows - 1));
  run(ctx, op, C,
      BnRunningBody{mean.ptr<float>(), var.ptr<float>(), momentum, unbias,
                    running_mean.ptr<float>(), running_var.ptr<float>(),
                    num_batches_tracked.ptr<float>()});
}

}  // namespace kiln::ops::cuda
