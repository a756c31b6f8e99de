#include "kiln/optim/grad_norm.h"

#include <cmath>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

double global_grad_norm(const ParamStore& store, Context& ctx, std::span<dist::Communicator* const> groups) {
  const std::vector<ops::TensorSegment>& segments = store.segments();
  const int64_t n = int64_t(segments.size());
  Tensor sums = ctx.scratch_tensor({n}, DType::i64);
  ops::segment_sum_squares(ctx, store.grads, Tensor{}, segments, sums);
  std::vector<double> host(static_cast<size_t>(n));
  Tensor host_view = Tensor::view(host.data(), {n}, DType::i64);
  ops::copy(ctx, sums, host_view);
  double total = 0.0;
  for (size_t k = 0; k < host.size(); ++k)  // in parameter order
    if (store.specs()[k].norm_owner) total += host[k];
  for (dist::Communicator* group : groups)
    if (group->size() > 1) dist::all_reduce_sum(*group, {&total, 1});
  return std::sqrt(total);
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

bool unscale_grads(ParamStore& store, float loss_scale, Context& ctx) {
  KILN_CHECK(loss_scale > 0.0f && std::isfinite(loss_scale),
             "gradient unscale: loss scale {} must be positive and finite", loss_scale);
  Tensor found = ctx.scratch_tensor({1}, DType::i32);
  ops::scale_check_finite(ctx, store.grads, 1.0f / loss_scale, found);
  int32_t host = 0;
  Tensor host_view = Tensor::view(&host, {1}, DType::i32);
  ops::copy(ctx, found, host_view);
  return host != 0;
}

}  // namespace kiln::optim
