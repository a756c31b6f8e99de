#include "kiln/optim/adamw.h"

#include <cmath>

#include "kiln/core/error.h"

namespace kiln::optim {

AdamW::AdamW(ParamStore& store, AdamWConfig config, Context& ctx)
    : Optimizer(store, ctx), config_(config) {
  KILN_CHECK(store.allocated(), "AdamW: the parameter store is not allocated");
  m_ = zeros_like_store();
  v_ = zeros_like_store();
}

std::vector<NamedState> AdamW::state() { return {{"m", &m_}, {"v", &v_}}; }

void AdamW::step(float lr) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const ops::AdamStep p{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                        adam_bias_correction(config_.beta1, t),
                        adam_bias_correction(config_.beta2, t)};
  ops::adamw_update(ctx_, p, store_.segments(), store_.values, store_.grads, m_, v_, store_.compute);
  ++steps_taken_;
}

}  // namespace kiln::optim
