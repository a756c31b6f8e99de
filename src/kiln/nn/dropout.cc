#include "kiln/nn/dropout.h"

#include "kiln/core/error.h"

namespace kiln::nn {

Dropout::Dropout(float p, uint32_t layer_id) : p(p), layer_id(layer_id) {
  KILN_CHECK(p >= 0.0f && p < 1.0f, "dropout probability {} is outside [0, 1)", p);
}

Tensor Dropout::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() >= 1, "dropout {}: input {} has no sample dimension", layer_id,
             shape_str(x.shape));
  return forward(step, x, x.dim(0));
}

bool Dropout::arm(const Step& step, int64_t samples) {
  active_ = step.training && p > 0.0f;
  if (!active_) return false;
  mask_.p = p;
  mask_.rng = RngStream{step.seed, rng_stream(RngPurpose::dropout, layer_id, 0)};
  if (step.sample_offset_tensor.defined()) {
    mask_.sample_offset = step.sample_offset_tensor;
  } else {
    KILN_CHECK(step.ctx->device.kind == DeviceKind::cpu,
               "dropout {}: a step on {} needs its sample offset in device memory (Step::sample_offset_tensor)",
               layer_id, step.ctx->device.str());
    host_offset_ = int64_t(step.sample_offset);
    mask_.sample_offset = Tensor::view(&host_offset_, {1}, DType::i64);
  }
  mask_.samples = samples;
  mask_.element_offset = element_offset;
  return true;
}

Tensor Dropout::forward(const Step& step, const Tensor& x, int64_t samples) {
  if (!arm(step, samples)) return x;
  Tensor y = y_.get(*step.ctx, x.shape, x.dtype);
  ops::dropout_forward(*step.ctx, x, mask_, y);
  return y;
}

Tensor Dropout::backward(const Step& step, const Tensor& dy) {
  if (!active_) return dy;
  Tensor dx = dx_.get(*step.ctx, dy.shape, dy.dtype);
  ops::dropout_backward(*step.ctx, dy, mask_, dx);
  return dx;
}

}  // namespace kiln::nn
