// backend/dispatch_cnn.cc — the CNN ops' entry points (see dispatch.cc), CPU or CUDA.
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/dispatch_cuda.h"

namespace kiln::ops {

void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "conv2d_forward", conv2d_forward(ctx, s, x, w, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::conv2d_forward(run, s, x, w, y); });
}

void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "conv2d_backward_data", conv2d_backward_data(ctx, s, dy, w, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::conv2d_backward_data(run, s, dy, w, dx); });
}

void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw, bool accumulate) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "conv2d_backward_weights", conv2d_backward_weights(ctx, s, x, dy, dw, accumulate));
  run_cpu(ctx, [=](Context& run) mutable { cpu::conv2d_backward_weights(run, s, x, dy, dw, accumulate); });
}

bool conv2d_native(DType dtype) { return cpu::conv2d_native(dtype); }

ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate) {
  return cpu::conv2d_scratch_bytes(s, dtype, accumulate);
}

void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var, const Tensor& residual) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_train_forward",
                        batchnorm_train_forward(ctx, x, gamma, beta, eps, relu, y, mean, var, residual));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::batchnorm_train_forward(run, x, gamma, beta, eps, relu, y, mean, var, residual);
  });
}

void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y, const Tensor& residual) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_eval_forward",
                        batchnorm_eval_forward(ctx, x, gamma, beta, mean, var, eps, relu, y, residual));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::batchnorm_eval_forward(run, x, gamma, beta, mean, var, eps, relu, y, residual);
  });
}

void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_backward",
                        batchnorm_backward(ctx, x, y, dy, gamma, mean, var, eps, relu, training,
                                           dx, dgamma, dbeta));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::batchnorm_backward(run, x, y, dy, gamma, mean, var, eps, relu, training, dx, dgamma, dbeta);
  });
}

void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_channel_sums",
                        batchnorm_channel_sums(ctx, x, sum));
  run_cpu(ctx, [=](Context& run) mutable { cpu::batchnorm_channel_sums(run, x, sum); });
}

void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum, int64_t total_rows,
                                  Tensor& squares) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_channel_deviations",
                        batchnorm_channel_deviations(ctx, x, sum, total_rows, squares));
  run_cpu(ctx, [=](Context& run) mutable { cpu::batchnorm_channel_deviations(run, x, sum, total_rows, squares); });
}

void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares, int64_t rows, Tensor& mean,
                               Tensor& var) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_stats_from_sums",
                        batchnorm_stats_from_sums(ctx, sum, squares, rows, mean, var));
  run_cpu(ctx, [=](Context& run) mutable { cpu::batchnorm_stats_from_sums(run, sum, squares, rows, mean, var); });
}

void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& mean,
                             bool relu, Tensor& sums) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_backward_sums",
                        batchnorm_backward_sums(ctx, x, y, dy, mean, relu, sums));
  run_cpu(ctx, [=](Context& run) mutable { cpu::batchnorm_backward_sums(run, x, y, dy, mean, relu, sums); });
}

void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_backward_from_sums",
                        batchnorm_backward_from_sums(ctx, x, y, dy, gamma, mean, var, eps, relu,
                                                     local_sums, global_sums, total_rows, dx,
                                                     dgamma, dbeta));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::batchnorm_backward_from_sums(run, x, y, dy, gamma, mean, var, eps, relu, local_sums, global_sums,
                                      total_rows, dx, dgamma, dbeta);
  });
}

void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "batchnorm_update_running",
                        batchnorm_update_running(ctx, mean, var, rows, momentum, running_mean,
                                                 running_var, num_batches_tracked));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::batchnorm_update_running(run, mean, var, rows, momentum, running_mean, running_var, num_batches_tracked);
  });
}

void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "maxpool_forward", maxpool_forward(ctx, s, x, y, argmax));
  run_cpu(ctx, [=](Context& run) mutable { cpu::maxpool_forward(run, s, x, y, argmax); });
}

void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "maxpool_backward", maxpool_backward(ctx, s, dy, argmax, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::maxpool_backward(run, s, dy, argmax, dx); });
}

void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "global_avgpool_forward", global_avgpool_forward(ctx, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::global_avgpool_forward(run, x, y); });
}

void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "global_avgpool_backward", global_avgpool_backward(ctx, dy, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::global_avgpool_backward(run, dy, dx); });
}

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "relu_forward", relu_forward(ctx, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::relu_forward(run, x, y); });
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "relu_backward", relu_backward(ctx, y, dy, dx, dy2));
  run_cpu(ctx, [=](Context& run) mutable { cpu::relu_backward(run, y, dy, dx, dy2); });
}

void residual_add(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "residual_add", residual_add(ctx, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::residual_add(run, x, y); });
}

}  // namespace kiln::ops
