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

void AdamW::step(float lr, float grad_scale) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const ops::AdamStep p{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                        adam_bias_correction(config_.beta1, t),
                        adam_bias_correction(config_.beta2, t), grad_scale};
  ops::adamw_update(ctx_, p, flat_.segments, flat_.values, flat_.grads, m_, v_, flat_.compute);
  ++steps_taken_;
}

}  // namespace kiln::optim
