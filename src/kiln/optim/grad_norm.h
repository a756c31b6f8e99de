// optim/grad_norm.h — global gradient norm, clipping, scaling and the non-finite check over
// ParamStore::grads, as backend ops (ops::segment_sum_squares, ops::scale_all,
// ops::scale_check_finite). Sums run in double over each parameter's slice in a fixed order, so
// the norm is deterministic for any thread count. `ctx` must be the device of the store.
#pragma once
#include <span>

#include "kiln/dist/communicator.h"
#include "kiln/core/context.h"
#include "kiln/nn/params.h"

namespace kiln::optim {

// sqrt(Σ g²) over all parameters; inf or NaN when a gradient is. With `groups` (ranks holding
// other parts of the gradients: a model-parallel group, data-parallel shards), the squares of
// the parameters with ParamSpec::norm_owner, summed over each group in turn, in rank order.
double global_grad_norm(const ParamStore& store, Context& ctx = cpu_context(),
                        std::span<dist::Communicator* const> groups = {});
// If the global norm is finite and exceeds max_norm, multiplies every gradient by max_norm/norm
// (no epsilon, as the MLPerf BERT reference). Returns the norm before clipping. A non-finite
// norm leaves the gradients untouched and is returned as it is: the caller must skip the step.
double clip_grad_norm(ParamStore& store, double max_norm, Context& ctx = cpu_context());
// g *= factor for every gradient (e.g. 1/loss_scale).
void scale_grads(ParamStore& store, float factor, Context& ctx = cpu_context());
// g *= 1/loss_scale in one pass that also looks for inf/NaN; true when any gradient is then
// non-finite (the step must be skipped and the loss scale lowered).
bool unscale_grads(ParamStore& store, float loss_scale, Context& ctx = cpu_context());

}  // namespace kiln::optim
