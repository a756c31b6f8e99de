// optim/grad_norm.h — global gradient norm, clipping and scaling over ParamStore::grads, as
// backend ops (ops::segment_sum_squares, ops::step_norm_squares, ops::scale_all). Sums run in
// double over each parameter's slice in a fixed order, so the norm is deterministic for any
// thread count. `ctx` must be the device of the store.
#pragma once
#include <span>

#include "kiln/dist/communicator.h"
#include "kiln/core/context.h"
#include "kiln/nn/params.h"

namespace kiln::optim {

// The global gradient norm's part of a step, on the device: scalars[kStepNormSquares] = Σ g² over
// the parameters with ParamSpec::norm_owner, then, with `groups` (ranks holding other parts of
// the gradients: a model-parallel group, data-parallel shards), summed over each group in turn,
// in rank order. Nothing is read back.
class GradNorm {
 public:
  GradNorm(const ParamStore& store, Context& ctx);
  void sum_squares(Tensor& scalars, std::span<dist::Communicator* const> groups = {});

 private:
  const ParamStore& store_;
  Context& ctx_;
  Tensor owners_;  // (parameters) i32 on the device: 1 where the parameter counts
  Tensor sums_;    // (parameters) f64 in i64
};

// sqrt(Σ g²) as GradNorm sums it, read back; inf or NaN when a gradient is.
double global_grad_norm(const ParamStore& store, Context& ctx = cpu_context(),
                        std::span<dist::Communicator* const> groups = {});
// If the global norm is finite and exceeds max_norm, multiplies every gradient by max_norm/norm
// (no epsilon, as the MLPerf BERT reference). Returns the norm before clipping. A non-finite
// norm leaves the gradients untouched and is returned as it is: the caller must skip the step.
double clip_grad_norm(ParamStore& store, double max_norm, Context& ctx = cpu_context());
// g *= factor for every gradient (e.g. 1/loss_scale).
void scale_grads(ParamStore& store, float factor, Context& ctx = cpu_context());

}  // namespace kiln::optim
