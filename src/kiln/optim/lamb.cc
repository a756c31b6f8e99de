#include "kiln/optim/lamb.h"

#include "kiln/core/error.h"

namespace kiln::optim {

Lamb::Lamb(ParamStore& store, LambConfig config, Context& ctx)
    : Optimizer(store, ctx), config_(config) {
  KILN_CHECK(store.allocated(), "LAMB: the parameter store is not allocated");
  m_ = zeros_like_store();
  v_ = zeros_like_store();
  norms_ = Tensor::empty({int64_t(store_.segments().size()), 2}, DType::i64, ctx.device);
}

std::vector<NamedState> Lamb::state() { return {{"m", &m_}, {"v", &v_}}; }

void Lamb::step(float lr) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const bool bc = config_.bias_correction;
  const ops::AdamStep p{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                        bc ? adam_bias_correction(config_.beta1, t) : 1.0f,
                        bc ? adam_bias_correction(config_.beta2, t) : 1.0f};
  // Pass 1: moments, and ‖w‖², ‖u‖² per parameter before w changes; pass 2 recomputes u from
  // the same m, v, w rather than storing it.
  ops::lamb_moments(ctx_, p, store_.segments(), store_.values, store_.grads, m_, v_, norms_);
  if (reduce_norms_) reduce_norms_(norms_);
  ops::lamb_update(ctx_, p, store_.segments(), norms_, store_.values, m_, v_, store_.compute);
  ++steps_taken_;
}

}  // namespace kiln::optim
