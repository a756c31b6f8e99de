#include "kiln/nn/conv2d.h"

#include "kiln/core/error.h"

namespace kiln::nn {

Conv2d::Conv2d(ParamStore& store, const std::string& prefix, const Conv2dOptions& opt)
    : opt(opt) {
  KILN_CHECK(opt.groups >= 1 && opt.in % opt.groups == 0 && opt.out % opt.groups == 0,
             "Conv2d {}: channels {} -> {} are not divisible by groups {}", prefix, opt.in,
             opt.out, opt.groups);
  KILN_CHECK(opt.kernel >= 1 && opt.stride >= 1 && opt.dilation >= 1 && opt.padding >= 0,
             "Conv2d {}: bad kernel {} / stride {} / dilation {} / padding {}", prefix, opt.kernel,
             opt.stride, opt.dilation, opt.padding);
  weight = store.add(prefix + ".weight", {opt.out, opt.in / opt.groups, opt.kernel, opt.kernel},
                     true);
  if (opt.bias) bias = store.add(prefix + ".bias", {opt.out}, false);
}

ops::ConvShape conv2d_shape(const Conv2dOptions& opt, int64_t N, int64_t H, int64_t W) {
  ops::ConvShape s;
  s.N = N;
  s.H = H;
  s.W = W;
  s.C = opt.in;
  s.K = opt.out;
  s.R = s.S = opt.kernel;
  s.stride_h = s.stride_w = opt.stride;
  s.pad_h = s.pad_w = opt.padding;
  s.dil_h = s.dil_w = opt.dilation;
  s.groups = opt.groups;
  return s;
}

int64_t conv2d_flops(const Conv2dOptions& opt, int64_t H, int64_t W) {
  const ops::ConvShape s = conv2d_shape(opt, 1, H, W);
  return 2 * s.P() * s.Q() * opt.out * (opt.in / opt.groups) * opt.kernel * opt.kernel;
}

Tensor Conv2d::forward(const Step& step, const Tensor& x) {
  KILN_CHECK(x.rank() == 4 && x.dim(3) == opt.in, "Conv2d {}: input {} is not (N, H, W, {})",
             weight.spec().name, shape_str(x.shape), opt.in);
  const Tensor w = weight.compute();
  KILN_CHECK(x.dtype == step.compute_dtype && w.dtype == step.compute_dtype,
             "Conv2d {}: input {} and weights {} are not in the compute dtype {}",
             weight.spec().name, dtype_name(x.dtype), dtype_name(w.dtype),
             dtype_name(step.compute_dtype));
  shape_ = shape(x.dim(0), x.dim(1), x.dim(2));
  KILN_CHECK(shape_.P() > 0 && shape_.Q() > 0, "Conv2d {}: input {} is too small",
             weight.spec().name, shape_str(x.shape));
  x_ = x;
  Tensor y = y_.get(*step.ctx, {shape_.N, shape_.P(), shape_.Q(), opt.out}, x.dtype);  // (N, P, Q, out)
  ops::conv2d_forward(*step.ctx, shape_, x, w, y);
  if (bias.id >= 0) {
    Tensor rows = y.reshape({y.numel() / opt.out, opt.out});  // (N*P*Q, out)
    ops::bias_add(*step.ctx, rows, bias.value());
  }
  return y;
}

Tensor Conv2d::backward(const Step& step, const Tensor& dy, bool need_dx) {
  KILN_CHECK(dy.rank() == 4 && dy.dim(0) == shape_.N && dy.dim(1) == shape_.P() &&
                 dy.dim(2) == shape_.Q() && dy.dim(3) == opt.out && dy.dtype == x_.dtype,
             "Conv2d {}: gradient {} {} does not match the output of the last forward",
             weight.spec().name, dtype_name(dy.dtype), shape_str(dy.shape));
  const Param::GradTarget dw = weight.grad_for_write();
  Tensor dw_grad = dw.grad;
  ops::conv2d_backward_weights(*step.ctx, shape_, x_, dy, dw_grad, dw.accumulate);
  if (bias.id >= 0) {
    Tensor db = bias.grad();
    ops::bias_grad(*step.ctx, dy.reshape({dy.numel() / opt.out, opt.out}), db);
  }
  if (!need_dx) return {};
  Tensor dx = dx_.get(*step.ctx, x_.shape, dy.dtype);  // (N, H, W, in)
  ops::conv2d_backward_data(*step.ctx, shape_, dy, weight.compute(), dx);
  return dx;
}

}  // namespace kiln::nn
