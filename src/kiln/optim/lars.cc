#include "kiln/optim/lars.h"

#include "kiln/core/error.h"

namespace kiln::optim {

Lars::Lars(ParamStore& store, LarsConfig config, Context& ctx, ShardRange shard)
    : Optimizer(store, ctx, shard), config_(config) {
  momentum_ = zeros_like_store();
  norms_ = Tensor::empty({int64_t(flat_.segments.size()), 2}, DType::i64, ctx.device);
}

std::vector<NamedState> Lars::state() { return {{"momentum", &momentum_}}; }

void Lars::update(const Tensor& scalars) {
  // The trust ratio reads ‖g‖: the gradients are scaled in place first (clipping).
  ops::scale_by_step_scalar(ctx_, flat_.grads, scalars, ops::kStepGradFactor);
  const ops::LarsStep p{config_.momentum, config_.weight_decay, config_.eeta, config_.epsilon};
  Tensor w = master(), w_compute = compute();
  ops::segment_sum_squares(ctx_, w, flat_.grads, flat_.segments, norms_, store_.split() ? w_compute : Tensor{});
  if (reduce_norms_) reduce_norms_(norms_);
  ops::lars_update(ctx_, p, scalars, flat_.segments, norms_, w, flat_.grads, momentum_, w_compute);
}

}  // namespace kiln::optim
