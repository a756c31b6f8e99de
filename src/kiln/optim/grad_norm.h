// optim/grad_norm.h — global gradient norm and clipping over ParamStore::grads. Sums run in double
// over each parameter's slice in a fixed order, so the result is deterministic.
#pragma once
#include "kiln/nn/params.h"

namespace kiln::optim {

// sqrt(Σ g²) over all parameters.
double global_grad_norm(const ParamStore& store);
// If the global norm exceeds max_norm, multiplies every gradient by max_norm/norm (no epsilon, as the
// MLPerf BERT reference). Returns the norm before clipping.
double clip_grad_norm(ParamStore& store, double max_norm);
// g *= factor for every gradient (e.g. 1/loss_scale).
void scale_grads(ParamStore& store, float factor);

}  // namespace kiln::optim
