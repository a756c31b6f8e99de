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
  Tensor none;
  return forward(step, x, Tensor{}, none);
}

Tensor LayerNorm::forward(const Step& step, const Tensor& a, const Tensor& b, Tensor& sum) {
  KILN_CHECK(a.rank() >= 1 && a.dim(-1) == dim, "LayerNorm {}: input {} does not end in {}",
             weight.spec().name, shape_str(a.shape), dim);
  const int64_t N = a.numel() / dim;
  Tensor y = y_.get(*step.ctx, a.shape, a.dtype);
  Tensor mean = mean_.get(*step.ctx, {N}), rstd = rstd_.get(*step.ctx, {N});
  if (b.defined()) {
    ops::add_layernorm_forward(*step.ctx, a, b, weight.compute(), bias.compute(), eps, sum, y, mean, rstd);
    x_ = sum;
  } else {
    ops::layernorm_forward(*step.ctx, a, weight.compute(), bias.compute(), eps, y, mean, rstd);
    x_ = a;
  }
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
  Tensor dw = dw_into_.defined() ? dw_into_ : weight.grad(), db = db_into_.defined() ? db_into_ : bias.grad();
  ops::layernorm_backward(*step.ctx, dy, x_, weight.compute(), mean_.get(*step.ctx, {N}), rstd_.get(*step.ctx, {N}),
                          dx, dw, db, accumulate);
}

}  // namespace kiln::nn
