#include "kiln/nn/linear.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/nn/sequence_parallel.h"

namespace kiln::nn {
namespace {

// The weights in the input's dtype: the compute copy, or the f32 master weights for an f32
// input under mixed precision (e.g. a classifier head kept in f32).
Tensor weights_for(const Param& p, DType dtype) {
  const Tensor c = p.compute();
  if (c.dtype == dtype) return c;
  KILN_CHECK(dtype == DType::f32, "Linear {}: input is {} but the weights compute in {}",
             p.spec().name, dtype_name(dtype), dtype_name(c.dtype));
  return p.value();
}

}  // namespace

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias)
    : weight(store.add(prefix + ".weight", {out, in}, true)), in(in), out(out) {
  if (bias) this->bias = store.add(prefix + ".bias", {out}, false);
}

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, Split split,
               const TensorParallel& tp)
    : in(in), out(out), split_(tp.split() ? split : Split::none), tp_(tp) {
  if (split_ == Split::column) {
    this->out = tp.share(out, (prefix + " outputs").c_str());
    weight = store.add_part(prefix + ".weight", {out, in}, true, 0, tp.start(out), this->out);
    bias = store.add_part(prefix + ".bias", {out}, false, 0, tp.start(out), this->out);
    return;
  }
  this->in = split_ == Split::row ? tp.share(in, (prefix + " inputs").c_str()) : in;
  weight = split_ == Split::row ? store.add_part(prefix + ".weight", {out, in}, true, 1, tp.start(in), this->in)
                               : store.add(prefix + ".weight", {out, in}, true);
  bias = store.add(prefix + ".bias", {out}, false);
}

Tensor Linear::weight_for(DType dtype) const { return weights_for(weight, dtype); }

Tensor Linear::bias_for(DType dtype) const { return bias.id >= 0 ? weights_for(bias, dtype) : Tensor{}; }

Tensor Linear::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() == 2 && x.dim(1) == in, "Linear {}: input {} does not match in={}",
             weight.spec().name, shape_str(x.shape), in);
  const Tensor w = weights_for(weight, x.dtype);
  const int64_t N = x.dim(0);
  x_ = x;
  Tensor y = y_.get(*step.ctx, {N, out}, x.dtype);  // (N, out)
  ops::MatmulOpts o;
  const Tensor b = bias.id >= 0 ? weights_for(bias, x.dtype) : Tensor{};
  const bool reduce = split_ == Split::row && tp_.split();
  if (bias.id >= 0 && !reduce) o.bias = &b;
  ops::matmul(*step.ctx, ops::mat(x), ops::mat(w, true), ops::mat(y), o);
  if (reduce) {
    if (tp_.sequence) y = tp_.sequence->scatter_sum(*step.ctx, y, reduced_.buffer());  // (N / t, out): this rank's rows
    else tp_.all_reduce(y);
    if (bias.id >= 0) ops::bias_add(*step.ctx, y, b);
  }
  return y;
}

Tensor Linear::backward(const Step& step, const Tensor& dy) {
  Tensor dx = dx_.get(*step.ctx, {x_.dim(0), in}, dy.dtype);
  backward_into(step, dy, dx, false);
  return dx;
}

void Linear::backward_into(const Step& step, const Tensor& dy_in, Tensor& dx, bool accumulate) {
  // Sequence parallel, row-parallel: dy holds this rank's rows of the output; every row's gradient
  // is the whole output's.
  const bool gather = split_ == Split::row && tp_.sequence;
  const Tensor dy = gather ? tp_.sequence->gather(*step.ctx, dy_in, gathered_dy_.buffer()) : dy_in;
  input_grad_into(step, dy, dx, accumulate);  // first: it checks dx before anything is written
  weight_grads(step, dy, weight.grad_for_write());
}

void Linear::weight_grads(const Step& step, const Tensor& dy, const Param::GradTarget& dw) {
  const int64_t N = x_.dim(0);
  KILN_CHECK(dy.rank() == 2 && dy.dim(0) == N && dy.dim(1) == out && dy.dtype == x_.dtype,
             "Linear {}: gradient {} {} does not match output ({}, {}) {}", weight.spec().name,
             dtype_name(dy.dtype), shape_str(dy.shape), N, out, dtype_name(x_.dtype));
  // dW (out, in) (+)= dy^T x in f32;  db += column sums of dy (in the same op).
  ops::MatmulOpts dw_opts;
  dw_opts.beta = dw.accumulate ? 1.0f : 0.0f;
  Tensor db = bias.id >= 0 ? bias.grad() : Tensor{};
  if (bias.id >= 0) dw_opts.bias_grad = &db;
  ops::matmul(*step.ctx, ops::mat(dy, true), ops::mat(x_), ops::mat(dw.grad), dw_opts);
}

void Linear::input_grad_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate) {
  const int64_t N = dy.dim(0);
  KILN_CHECK(dx.numel() == N * in, "Linear {}: input gradient {} is not ({}, {})",
             weight.spec().name, shape_str(dx.shape), N, in);
  Context& ctx = *step.ctx;
  // dx (N, in) (+)= dy W.
  ops::MatmulOpts o;
  const Tensor w = weights_for(weight, dy.dtype);
  if (split_ == Split::column && tp_.split() && reduce_input_grad) {  // this rank's share of dx, summed over the group
    Tensor part = partial_dx_.get(*step.ctx, {N, in}, dy.dtype);
    ops::matmul(ctx, ops::mat(dy), ops::mat(w), ops::mat(part), o);
    tp_.all_reduce(part);
    Tensor d = dx.reshape({N, in});
    if (accumulate) ops::add(ctx, d, part, d);
    else ops::copy(ctx, part, d);
    return;
  }
  o.beta = accumulate ? 1.0f : 0.0f;
  ops::matmul(ctx, ops::mat(dy), ops::mat(w), ops::mat(dx.reshape({N, in})), o);
}

}  // namespace kiln::nn
