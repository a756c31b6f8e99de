#include "kiln/nn/batchnorm2d.h"

#include <algorithm>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

BatchNorm2d::BatchNorm2d(ParamStore& store, const std::string& prefix, int64_t channels,
                         bool relu, float eps, float momentum)
    : weight(store.add(prefix + ".weight", {channels}, false)),
      bias(store.add(prefix + ".bias", {channels}, false)),
      running_mean(Tensor::empty({channels})),
      running_var(Tensor::empty({channels})),
      num_batches_tracked(Tensor::empty({1})),
      channels(channels),
      relu(relu),
      eps(eps),
      momentum(momentum),
      prefix_(prefix),
      batch_mean_(Tensor::empty({channels})),
      batch_var_(Tensor::empty({channels})) {
  reset_running_stats();
}

void BatchNorm2d::reset_running_stats() {
  ops::fill(cpu_context(), running_mean, 0.0f);
  ops::fill(cpu_context(), running_var, 1.0f);
  ops::fill(cpu_context(), num_batches_tracked, 0.0f);
}

void BatchNorm2d::reset(float gamma_value) {
  std::fill(weight.w(), weight.w() + channels, gamma_value);
  std::fill(bias.w(), bias.w() + channels, 0.0f);
  reset_running_stats();
}

NamedBuffers BatchNorm2d::buffers() {
  return {{prefix_ + ".running_mean", &running_mean},
          {prefix_ + ".running_var", &running_var},
          {prefix_ + ".num_batches_tracked", &num_batches_tracked}};
}

void BatchNorm2d::set_sync(dist::Communicator* comm) {
  sync_ = comm && comm->size() > 1 ? comm : nullptr;
  if (!sync_) return;
  sum_ = Tensor::empty({channels}, DType::f64);
  squares_ = Tensor::empty({channels}, DType::f64);
  local_sums_ = Tensor::empty({2 * channels}, DType::f64);
  global_sums_ = Tensor::empty({2 * channels}, DType::f64);
}

void BatchNorm2d::to_device(Context& ctx) {
  for (Tensor* t : {&running_mean, &running_var, &num_batches_tracked, &batch_mean_, &batch_var_, &sum_, &squares_,
                    &local_sums_, &global_sums_})
    if (t->defined()) *t = ops::on_device(ctx, *t);
}

void BatchNorm2d::forward_synced(Context& ctx, int64_t rows, const Tensor& residual, bool apply_relu) {
  const int64_t total = rows * sync_->size();
  ops::batchnorm_channel_sums(ctx, x_, sum_);
  sync_->all_reduce_sum(sum_);
  ops::batchnorm_channel_deviations(ctx, x_, sum_, total, squares_);
  sync_->all_reduce_sum(squares_);
  ops::batchnorm_stats_from_sums(ctx, sum_, squares_, total, mean_, var_);
  ops::batchnorm_eval_forward(ctx, x_, weight.value(), bias.value(), mean_, var_, eps, apply_relu, y_, residual);
  ops::batchnorm_update_running(ctx, mean_, var_, total, momentum, running_mean, running_var, num_batches_tracked);
}

Tensor BatchNorm2d::backward_synced(Context& ctx, const Tensor& dy) {
  Tensor dx = dx_.get(ctx, x_.shape, x_.dtype);
  Tensor dgamma = weight.grad(), dbeta = bias.grad();
  ops::batchnorm_backward_sums(ctx, x_, y_, dy, mean_, relu, local_sums_);
  ops::copy(ctx, local_sums_, global_sums_);
  sync_->all_reduce_sum(global_sums_);
  ops::batchnorm_backward_from_sums(ctx, x_, y_, dy, weight.value(), mean_, var_, eps, relu, local_sums_,
                                    global_sums_, x_.numel() / channels * sync_->size(), dx, dgamma, dbeta);
  return dx;
}

Tensor BatchNorm2d::forward(const Step& step, const Tensor& x) { return forward_impl(step, x, Tensor{}, relu); }

Tensor BatchNorm2d::forward_join(const Step& step, const Tensor& x, const Tensor& shortcut) {
  KILN_CHECK(!relu, "BatchNorm2d {}: a join's ReLU comes after the shortcut, not in the layer", prefix_);
  return forward_impl(step, x, shortcut, true);
}

Tensor BatchNorm2d::forward_impl(const Step& step, const Tensor& x, const Tensor& residual, bool apply_relu) {
  KILN_CHECK(x.rank() == 4 && x.dim(3) == channels,
             "BatchNorm2d {}: input {} is not (N, H, W, {})", prefix_, shape_str(x.shape),
             channels);
  const int64_t rows = x.numel() / channels;
  x_ = x;
  y_ = out_.get(*step.ctx, x.shape, x.dtype);
  training_ = step.training;
  Context& ctx = *step.ctx;
  if (training_) {
    KILN_CHECK(rows > 1, "BatchNorm2d {}: training needs more than one value per channel, got {}",
               prefix_, shape_str(x.shape));
    mean_ = batch_mean_;
    var_ = batch_var_;
    if (sync_) {
      forward_synced(ctx, rows, residual, apply_relu);
      return y_;
    }
    ops::batchnorm_train_forward(ctx, x, weight.value(), bias.value(), eps, apply_relu, y_, mean_,
                                 var_, residual);
    ops::batchnorm_update_running(ctx, mean_, var_, rows, momentum, running_mean, running_var,
                                  num_batches_tracked);
  } else {
    // Unchanged until backward: nothing updates running statistics outside training.
    mean_ = running_mean;
    var_ = running_var;
    ops::batchnorm_eval_forward(ctx, x, weight.value(), bias.value(), mean_, var_, eps, apply_relu, y_, residual);
  }
  return y_;
}

Tensor BatchNorm2d::backward(const Step& step, const Tensor& dy) {
  KILN_CHECK(dy.shape == x_.shape && dy.dtype == x_.dtype,
             "BatchNorm2d {}: gradient {} {} does not match input {} {}", prefix_,
             dtype_name(dy.dtype), shape_str(dy.shape), dtype_name(x_.dtype), shape_str(x_.shape));
  if (sync_ && training_) return backward_synced(*step.ctx, dy);
  Tensor dx = dx_.get(*step.ctx, x_.shape, x_.dtype);
  Tensor dgamma = weight.grad(), dbeta = bias.grad();
  ops::batchnorm_backward(*step.ctx, x_, y_, dy, weight.value(), mean_, var_, eps, relu,
                          training_, dx, dgamma, dbeta);
  return dx;
}

}  // namespace kiln::nn
