// backend/dispatch_cnn.cc — the CNN ops' entry points (see dispatch.cc); CPU only so far.
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/route.h"

namespace kiln::ops {

void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y) {
  cpu_only(ctx, "conv2d_forward");
  cpu::conv2d_forward(ctx, s, x, w, y);
}

void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx) {
  cpu_only(ctx, "conv2d_backward_data");
  cpu::conv2d_backward_data(ctx, s, dy, w, dx);
}

void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw) {
  cpu_only(ctx, "conv2d_backward_weights");
  cpu::conv2d_backward_weights(ctx, s, x, dy, dw);
}

bool conv2d_native(DType dtype) { return cpu::conv2d_native(dtype); }

void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var) {
  cpu_only(ctx, "batchnorm_train_forward");
  cpu::batchnorm_train_forward(ctx, x, gamma, beta, eps, relu, y, mean, var);
}

void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y) {
  cpu_only(ctx, "batchnorm_eval_forward");
  cpu::batchnorm_eval_forward(ctx, x, gamma, beta, mean, var, eps, relu, y);
}

void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  cpu_only(ctx, "batchnorm_backward");
  cpu::batchnorm_backward(ctx, x, y, dy, gamma, mean, var, eps, relu, training, dx, dgamma, dbeta);
}

void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum) {
  cpu_only(ctx, "batchnorm_channel_sums");
  cpu::batchnorm_channel_sums(ctx, x, sum);
}

void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum, int64_t total_rows,
                                  Tensor& squares) {
  cpu_only(ctx, "batchnorm_channel_deviations");
  cpu::batchnorm_channel_deviations(ctx, x, sum, total_rows, squares);
}

void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares, int64_t rows, Tensor& mean,
                               Tensor& var) {
  cpu_only(ctx, "batchnorm_stats_from_sums");
  cpu::batchnorm_stats_from_sums(ctx, sum, squares, rows, mean, var);
}

void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& mean,
                             bool relu, Tensor& sums) {
  cpu_only(ctx, "batchnorm_backward_sums");
  cpu::batchnorm_backward_sums(ctx, x, y, dy, mean, relu, sums);
}

void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta) {
  cpu_only(ctx, "batchnorm_backward_from_sums");
  cpu::batchnorm_backward_from_sums(ctx, x, y, dy, gamma, mean, var, eps, relu, local_sums, global_sums, total_rows, dx,
                                    dgamma, dbeta);
}

void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked) {
  cpu_only(ctx, "batchnorm_update_running");
  cpu::batchnorm_update_running(ctx, mean, var, rows, momentum, running_mean, running_var,
                                num_batches_tracked);
}

void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax) {
  cpu_only(ctx, "maxpool_forward");
  cpu::maxpool_forward(ctx, s, x, y, argmax);
}

void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx) {
  cpu_only(ctx, "maxpool_backward");
  cpu::maxpool_backward(ctx, s, dy, argmax, dx);
}

void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  cpu_only(ctx, "global_avgpool_forward");
  cpu::global_avgpool_forward(ctx, x, y);
}

void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  cpu_only(ctx, "global_avgpool_backward");
  cpu::global_avgpool_backward(ctx, dy, dx);
}

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  cpu_only(ctx, "relu_forward");
  cpu::relu_forward(ctx, x, y);
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  cpu_only(ctx, "relu_backward");
  cpu::relu_backward(ctx, y, dy, dx);
}

void add_relu_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  cpu_only(ctx, "add_relu_forward");
  cpu::add_relu_forward(ctx, a, b, y);
}

void residual_add(Context& ctx, const Tensor& x, Tensor& y) {
  cpu_only(ctx, "residual_add");
  cpu::residual_add(ctx, x, y);
}

}  // namespace kiln::ops
