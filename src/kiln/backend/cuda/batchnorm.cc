// backend/cuda/batchnorm.cc — batch norm (training, eval, backward, the SyncBN steps and the
// running statistics) on CUDA: checks, then the bodies of batchnorm_bodies.h.
#include <algorithm>

#include "kiln/backend/cuda/batchnorm_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"

namespace kiln::ops::cuda {
namespace {

// The rows of x (rows, C).
int64_t rows_of(const Tensor& x) { return x.numel() / x.dim(-1); }

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
  if (residual.defined()) r = float_ptr(op, "residual", residual);
  const ScratchScope own_scratch(ctx);
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
  const ScratchScope own_scratch(ctx);
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
  const ScratchScope own_scratch(ctx);
  const int64_t rows = rows_of(x), C = x.dim(-1);
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
  normalize(ctx, op, x, gamma, beta, mean, var, eps, relu, residual, y);
}

void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  const OpScope scope =
      expect_cuda(ctx, op, {&x, &y, &dy, &gamma, &mean, &var, &dx, &dgamma, &dbeta});
  const ScratchScope own_scratch(ctx);
  const int64_t rows = rows_of(x);
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
  const int64_t rows = rows_of(x);
  channel_pass(ctx, op, pass(BnSum::x, op, x, rows), sum.ptr<double>());
}

void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum,
                                  int64_t total_rows, Tensor& squares) {
  const char* op = "batchnorm_channel_deviations";
  const OpScope scope = expect_cuda(ctx, op, {&x, &sum, &squares});
  const int64_t rows = rows_of(x);
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
  run(ctx, op, C,
      BnStatsBody{sum.ptr<double>(), squares.ptr<double>(), rows, mean.ptr<float>(),
                  var.ptr<float>()});
}

void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                             const Tensor& mean, bool relu, Tensor& sums) {
  const char* op = "batchnorm_backward_sums";
  const OpScope scope = expect_cuda(ctx, op, {&x, &y, &dy, &mean, &sums});
  const int64_t rows = rows_of(x);
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
  const float unbias = float(double(rows) / double(rows - 1));
  run(ctx, op, mean.numel(),
      BnRunningBody{mean.ptr<float>(), var.ptr<float>(), momentum, unbias,
                    running_mean.ptr<float>(), running_var.ptr<float>(),
                    num_batches_tracked.ptr<float>()});
}

}  // namespace kiln::ops::cuda
