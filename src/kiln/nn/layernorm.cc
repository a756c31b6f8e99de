#include "kiln/nn/layernorm.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

LayerNorm::LayerNorm(ParamStore& store, const std::string& prefix, int64_t dim, float eps)
    : weight(store.add(prefix + ".weight", {dim}, false)),
      bias(store.add(prefix + ".bias", {dim}, false)),
      dim(dim),
      eps(eps) {}

Tensor LayerNorm::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) == dim, "LayerNorm {}: input {} does not end in {}",
             weight.spec().name, shape_str(x.shape), dim);
  const int64_t N = x.numel() / dim;
  x_ = x;
  Tensor y = y_.get(*step.ctx, x.shape, x.dtype);
  Tensor mean = mean_.get(*step.ctx, {N}), rstd = rstd_.get(*step.ctx, {N});
  ops::layernorm_forward(*step.ctx, x, weight.compute(), bias.compute(), eps, y, mean, rstd);
  return y;
}

Tensor LayerNorm::backward(const Step& step, const Tensor& dy) {
  Tensor dx = dx_.get(*step.ctx, x_.shape, dy.dtype);
  backward_into(step, dy, dx, false);
  return dx;
}

void LayerNorm::backward_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate) {
  KILN_CHECK(dy.numel() == x_.numel() && dx.numel() == x_.numel(),
             "LayerNorm {}: gradient {} / {} does not match input {}", weight.spec().name,
             shape_str(dy.shape), shape_str(dx.shape), shape_str(x_.shape));
  const int64_t N = x_.numel() / dim;
  Tensor dw = weight.grad(), db = bias.grad();
  ops::layernorm_backward(*step.ctx, dy, x_, weight.compute(), mean_.get(*step.ctx, {N}), rstd_.get(*step.ctx, {N}),
                          dx, dw, db, accumulate);
}

}  // namespace kiln::nn
