// nn/linear.h — y = x W^T + b, Hugging Face layout: weight (out, in), bias (out).
// Tensor parallel (spec §3.2), parameters registered as parts of the whole ones:
//   column: rows [r*out/TP, ...) of W and b; x replicated, y sharded; backward all-reduces dx.
//   row:    columns [r*in/TP, ...) of W, b replicated; x sharded; forward all-reduces x W^T
//           over the group and then adds b once.
#pragma once
#include <string>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/tensor_parallel.h"

namespace kiln::nn {

enum class Split { none, column, row };

class Linear {
 public:
  // Registers `prefix.weight` (out, in) with decay and, if `bias`, `prefix.bias` (out) without.
  Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias = true);
  // A tensor-parallel part (with bias); `in` and `out` are the whole layer's sizes.
  Linear(ParamStore& store, const std::string& prefix, int64_t in, int64_t out, Split split,
         const TensorParallel& tp);

  // x: (N, in) in the weights' compute dtype (or f32: then the f32 master weights are used)
  // -> y: (N, out) in x's dtype; the bias is added by the matmul. Keeps a handle to x for backward (x must stay unchanged until then).
  // The result lives in this layer's buffer until the next forward. Row-parallel under sequence
  // parallelism (tp.sequence): y is this rank's rows of the sum, (N / t, out), and backward's dy too.
  Tensor forward(const Step& step, const Tensor& x);
  // dy: (N, out) in x's dtype -> dx: (N, in); accumulates weight.grad() += dy^T x and
  // bias.grad() += sum dy in f32. The result lives in this layer's buffer until the next
  // backward.
  Tensor backward(const Step& step, const Tensor& dy);
  // backward() writing dx (N, in) into the caller's tensor, or adding to it when `accumulate`
  // (a residual or multi-branch gradient, summed by the matmul instead of an add pass).
  void backward_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate);
  // backward_into's two halves, for a caller that runs several layers' weight gradients in one
  // product (attention's q, k and v): dW (out, in) into `dw` (weight.grad_for_write()'s) and
  // bias.grad() += column sums of dy (N, out); dx (N, in) from dy. Neither gathers a sequence-
  // parallel row-parallel dy.
  void weight_grads(const Step& step, const Tensor& dy, const Param::GradTarget& dw);
  void input_grad_into(const Step& step, const Tensor& dy, Tensor& dx, bool accumulate);
  // Writes y / backward's dx into these buffers (shared with other layers) instead of its own:
  // for an output only the next op reads, and a gradient only the layer below reads.
  void use_output_buffer(Buffer& y) { y_.use(y); }
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }
  // Column-parallel: this rank's share of dx before the group sums it, in this buffer.
  void use_partial_grad_buffer(Buffer& part) { partial_dx_.use(part); }
  // Row-parallel under sequence parallelism: this rank's rows of the output and the whole dy in these.
  void use_sequence_buffers(Buffer& rows, Buffer& whole_dy) { reduced_.use(rows), gathered_dy_.use(whole_dy); }
  // The weights and bias as forward reads them for an input of `dtype` (the compute copy, or the
  // f32 master weights for an f32 input); the bias undefined without one.
  Tensor weight_for(DType dtype) const;
  Tensor bias_for(DType dtype) const;
  // For a product run outside forward (the attention's q, k, v in one call, nn/attention.cc): the
  // input x (N, in) that backward reads, as forward would have kept it; and that input.
  void keep_input(const Tensor& x) { x_ = x; }
  const Tensor& kept_input() const { return x_; }
  // Its buffers over `owner`'s (nn::Buffer::share), for a layer never alive at the same time.
  void share_storage(Linear& owner) {
    y_.share_own(owner.y_), dx_.share_own(owner.dx_), partial_dx_.share_own(owner.partial_dx_);
    reduced_.share_own(owner.reduced_), gathered_dy_.share_own(owner.gathered_dy_);
  }

  Param weight, bias;  // bias.id == -1 when constructed without bias
  int64_t in, out;     // this rank's sizes
  // Column-parallel: backward all-reduces dx. False: dx is this rank's share, which the caller
  // sums over the group (one all-reduce for several layers reading the same input).
  bool reduce_input_grad = true;

 private:
  Split split_ = Split::none;
  TensorParallel tp_;
  Tensor x_;
  BufferSlot y_, dx_;
  BufferSlot partial_dx_;
  BufferSlot reduced_, gathered_dy_;  // sequence parallel, row-parallel: the output's rows, the whole dy
};

}  // namespace kiln::nn
