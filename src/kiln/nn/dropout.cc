#include "kiln/nn/dropout.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Dropout::Dropout(float p, uint32_t layer_id) : p(p), layer_id(layer_id) {
  KILN_CHECK(p >= 0.0f && p < 1.0f, "dropout probability {} is outside [0, 1)", p);
}

Tensor Dropout::forward(const Step& step, const Tensor& x) {
  active_ = step.training && p > 0.0f;
  if (!active_) return x;
  rng_ = RngStream{step.seed, rng_stream(RngPurpose::dropout, layer_id, step.index)};
  Tensor y = y_.get(x.shape);
  ops::dropout_forward(x.ptr<float>(), x.numel(), p, rng_, y.ptr<float>());
  return y;
}

Tensor Dropout::backward(const Step&, const Tensor& dy) {
  if (!active_) return dy;
  Tensor dx = dx_.get(dy.shape);
  ops::dropout_backward(dy.ptr<float>(), dy.numel(), p, rng_, dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
