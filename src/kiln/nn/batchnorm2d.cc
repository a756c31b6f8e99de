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
      mean_(size_t(channels)),
      var_(size_t(channels)) {
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

Tensor BatchNorm2d::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() == 4 && x.dim(3) == channels,
             "BatchNorm2d {}: input {} is not (N, H, W, {})", prefix_, shape_str(x.shape),
             channels);
  const int64_t rows = x.numel() / channels;
  x_ = x;
  y_ = out_.get(x.shape);
  training_ = step.training;
  if (training_) {
    KILN_CHECK(rows > 1, "BatchNorm2d {}: training needs more than one value per channel, got {}",
               prefix_, shape_str(x.shape));
    ops::batchnorm_train_forward(x.ptr<float>(), weight.w(), bias.w(), rows, channels, eps, relu,
                                 y_.ptr<float>(), mean_.data(), var_.data());
    const float unbias = float(double(rows) / double(rows - 1));
    float* rm = running_mean.ptr<float>();
    float* rv = running_var.ptr<float>();
    for (int64_t c = 0; c < channels; ++c) {
      rm[c] = (1.0f - momentum) * rm[c] + momentum * mean_[c];
      rv[c] = (1.0f - momentum) * rv[c] + momentum * var_[c] * unbias;
    }
    num_batches_tracked.ptr<float>()[0] += 1.0f;
  } else {
    mean_.assign(running_mean.ptr<float>(), running_mean.ptr<float>() + channels);
    var_.assign(running_var.ptr<float>(), running_var.ptr<float>() + channels);
    ops::batchnorm_eval_forward(x.ptr<float>(), weight.w(), bias.w(), mean_.data(), var_.data(),
                                rows, channels, eps, relu, y_.ptr<float>());
  }
  return y_;
}

Tensor BatchNorm2d::backward(const Step&, const Tensor& dy) {
  KILN_CHECK(dy.shape == x_.shape, "BatchNorm2d {}: gradient {} does not match input {}", prefix_,
             shape_str(dy.shape), shape_str(x_.shape));
  Tensor dx = dx_.get(x_.shape);
  ops::batchnorm_backward(x_.ptr<float>(), y_.ptr<float>(), dy.ptr<float>(), weight.w(),
                          mean_.data(), var_.data(), x_.numel() / channels, channels, eps, relu,
                          training_, dx.ptr<float>(), weight.g(), bias.g());
  return dx;
}

}  // namespace kiln::nn
