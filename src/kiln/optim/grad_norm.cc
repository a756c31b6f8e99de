#include "kiln/optim/grad_norm.h"

#include <cmath>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/optim/step_scalars.h"

namespace kiln::optim {

GradNorm::GradNorm(const ParamStore& store, Context& ctx) : store_(store), ctx_(ctx) {
  const int64_t n = int64_t(store.specs().size());
  std::vector<int32_t> owners;
  for (const ParamSpec& spec : store.specs()) owners.push_back(spec.norm_owner ? 1 : 0);
  owners_ = Tensor::empty({n}, DType::i32, ctx.device);
  ops::copy(ctx, Tensor::view(owners.data(), {n}, DType::i32), owners_);
  sums_ = Tensor::empty({n}, DType::i64, ctx.device);
}

void GradNorm::sum_squares(Tensor& scalars, std::span<dist::Communicator* const> groups) {
  ops::segment_sum_squares(ctx_, store_.grads, Tensor{}, store_.segments(), sums_);
  ops::step_norm_squares(ctx_, sums_, owners_, scalars);
  Tensor total = Tensor::view(static_cast<int64_t*>(scalars.data) + ops::kStepNormSquares, {1}, DType::f64,
                              scalars.device);
  for (dist::Communicator* group : groups)
    if (group->size() > 1) group->all_reduce_sum(total);
}

double global_grad_norm(const ParamStore& store, Context& ctx, std::span<dist::Communicator* const> groups) {
  StepScalars scalars(ctx);
  scalars.write({});
  GradNorm(store, ctx).sum_squares(scalars.device(), groups);
  return std::sqrt(scalars.read().norm_squares);
}

double clip_grad_norm(ParamStore& store, double max_norm, Context& ctx) {
  KILN_CHECK(max_norm > 0.0, "gradient clipping: max norm {} must be positive", max_norm);
  const double norm = global_grad_norm(store, ctx);
  if (std::isfinite(norm) && norm > max_norm) scale_grads(store, float(max_norm / norm), ctx);
  return norm;
}

void scale_grads(ParamStore& store, float factor, Context& ctx) {
  ops::scale_all(ctx, store.grads, factor);
}

}  // namespace kiln::optim
