#include "kiln/optim/adamw.h"

#include <cmath>

#include "kiln/core/error.h"

namespace kiln::optim {

AdamW::AdamW(ParamStore& store, AdamWConfig config, Context& ctx, ShardRange shard)
    : Optimizer(store, ctx, shard), config_(config) {
  m_ = zeros_like_store();
  v_ = zeros_like_store();
}

std::vector<NamedState> AdamW::state() { return {{"m", &m_}, {"v", &v_}}; }

void AdamW::set_inputs(StepInputs& in) const {
  const double t = double(steps_taken_ + 1);
  in.bc1 = adam_bias_correction(config_.beta1, t);
  in.bc2 = adam_bias_correction(config_.beta2, t);
}

void AdamW::update(const Tensor& scalars) {
  const ops::AdamStep p{config_.beta1, config_.beta2, config_.eps, config_.weight_decay};
  Tensor w = master(), w_compute = compute();
  ops::adamw_update(ctx_, p, scalars, flat_.segments, w, flat_.grads, m_, v_, w_compute);
}

}  // namespace kiln::optim
