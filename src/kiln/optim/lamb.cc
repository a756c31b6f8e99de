#include "kiln/optim/lamb.h"

#include "kiln/core/error.h"

namespace kiln::optim {

Lamb::Lamb(ParamStore& store, LambConfig config, Context& ctx, ShardRange shard)
    : Optimizer(store, ctx, shard), config_(config) {
  m_ = zeros_like_store();
  v_ = zeros_like_store();
  norms_ = Tensor::empty({int64_t(flat_.segments.size()), 2}, DType::i64, ctx.device);
}

std::vector<NamedState> Lamb::state() { return {{"m", &m_}, {"v", &v_}}; }

void Lamb::set_inputs(StepInputs& in) const {
  if (!config_.bias_correction) return;
  const double t = double(steps_taken_ + 1);
  in.bc1 = adam_bias_correction(config_.beta1, t);
  in.bc2 = adam_bias_correction(config_.beta2, t);
}

void Lamb::update(const Tensor& scalars) {
  const ops::AdamStep p{config_.beta1, config_.beta2, config_.eps, config_.weight_decay};
  // Pass 1: moments, and ‖w‖², ‖u‖² per parameter before w changes; pass 2 recomputes u from
  // the same m, v, w rather than storing it.
  Tensor w = master(), w_compute = compute();
  ops::lamb_moments(ctx_, p, scalars, flat_.segments, w, w_compute, flat_.grads, m_, v_, norms_);
  if (reduce_norms_) reduce_norms_(norms_);
  ops::lamb_update(ctx_, p, scalars, flat_.segments, norms_, w, m_, v_, w_compute);
}

}  // namespace kiln::optim
