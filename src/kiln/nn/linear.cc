#include "kiln/nn/linear.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias)
    : weight(store.add(prefix + ".weight", {out, in}, true)), in(in), out(out) {
  if (bias) this->bias = store.add(prefix + ".bias", {out}, false);
}

Tensor Linear::forward(const Step&, const Tensor& x) {
  KILN_CHECK(x.rank() == 2 && x.dim(1) == in, "Linear {}: input {} does not match in={}",
             weight.spec().name, shape_str(x.shape), in);
  const int64_t N = x.dim(0);
  x_ = x;
  Tensor y = y_.get({N, out});  // (N, out)
  ops::gemm(false, true, N, out, in, 1.0f, x.ptr<float>(), in, weight.w(), in, 0.0f,
            y.ptr<float>(), out);
  if (bias.id >= 0) ops::bias_add(y.ptr<float>(), bias.w(), N, out);
  return y;
}

Tensor Linear::backward(const Step&, const Tensor& dy) {
  const int64_t N = x_.dim(0);
  KILN_CHECK(dy.rank() == 2 && dy.dim(0) == N && dy.dim(1) == out,
             "Linear {}: gradient {} does not match output ({}, {})", weight.spec().name,
             shape_str(dy.shape), N, out);
  // dW (out, in) += dy^T x;  db += column sums of dy;  dx (N, in) = dy W.
  ops::gemm(true, false, out, in, N, 1.0f, dy.ptr<float>(), out, x_.ptr<float>(), in, 1.0f,
            weight.g(), in);
  if (bias.id >= 0) ops::bias_grad(dy.ptr<float>(), N, out, bias.g());
  Tensor dx = dx_.get({N, in});
  ops::gemm(false, false, N, in, out, 1.0f, dy.ptr<float>(), out, weight.w(), in, 0.0f,
            dx.ptr<float>(), in);
  return dx;
}

}  // namespace kiln::nn
