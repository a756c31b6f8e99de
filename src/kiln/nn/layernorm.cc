#include "kiln/nn/layernorm.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

LayerNorm::LayerNorm(ParamStore& store, const std::string& prefix, int64_t dim, float eps)
    : weight(store.add(prefix + ".weight", {dim}, false)),
      bias(store.add(prefix + ".bias", {dim}, false)),
      dim(dim),
      eps(eps) {}

Tensor LayerNorm::forward(const Step&, const Tensor& x) {
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) == dim, "LayerNorm {}: input {} does not end in {}",
             weight.spec().name, shape_str(x.shape), dim);
  const int64_t N = x.numel() / dim;
  x_ = x;
  Tensor y = y_.get(x.shape);
  ops::layernorm_forward(x.ptr<float>(), weight.w(), bias.w(), eps, N, dim, y.ptr<float>(),
                         mean_.get({N}).ptr<float>(), rstd_.get({N}).ptr<float>());
  return y;
}

Tensor LayerNorm::backward(const Step&, const Tensor& dy) {
  KILN_CHECK(dy.numel() == x_.numel(), "LayerNorm {}: gradient {} does not match input {}",
             weight.spec().name, shape_str(dy.shape), shape_str(x_.shape));
  const int64_t N = x_.numel() / dim;
  Tensor dx = dx_.get(x_.shape);
  ops::layernorm_backward(dy.ptr<float>(), x_.ptr<float>(), weight.w(),
                          mean_.get({N}).ptr<float>(), rstd_.get({N}).ptr<float>(), N, dim,
                          dx.ptr<float>(), weight.g(), bias.g());
  return dx;
}

}  // namespace kiln::nn
