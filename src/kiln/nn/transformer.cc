#include "kiln/nn/transformer.h"

#include "kiln/backend/backend.h"
#include "kiln/nn/sequence_parallel.h"

namespace kiln::nn {

TransformerLayer::TransformerLayer(ParamStore& store, const std::string& prefix, int64_t hidden,
                                   int64_t heads, int64_t intermediate_size,
                                   float hidden_dropout, float attn_dropout, bool pre_ln,
                                   GeluKind gelu_kind, uint32_t layer_id,
                                   AttentionBuffers* recompute_attention,
                                   const TensorParallel& tp)
    : attention(store, prefix + ".attention.self", hidden, heads, attn_dropout, 4 * layer_id + 1,
                recompute_attention, tp),
      attention_output(store, prefix + ".attention.output.dense", hidden, hidden, Split::row, tp),
      attention_norm(store, prefix + ".attention.output.LayerNorm", hidden),
      intermediate(store, prefix + ".intermediate.dense", hidden, intermediate_size, Split::column,
                   tp),
      gelu(gelu_kind),
      output(store, prefix + ".output.dense", intermediate_size, hidden, Split::row, tp),
      output_norm(store, prefix + ".output.LayerNorm", hidden),
      pre_ln(pre_ln),
      tp_(tp),
      attention_dropout_(hidden_dropout, 4 * layer_id + 2),
      output_dropout_(hidden_dropout, 4 * layer_id + 3) {
  if (tp.sequence) intermediate.reduce_input_grad = false;  // summed over the group and split at once
}

void TransformerLayer::share_buffers(LayerSharedBuffers& shared, int parity) {
  attention_output.use_output_buffer(shared.attention_out);
  output.use_output_buffer(shared.output_out);
  attention_dropout_.use_buffers(shared.attention_dropped, shared.attention_dropout_dx);
  output_dropout_.use_buffers(shared.output_dropped, shared.output_dropout_dx);
  attention_output.use_grad_buffer(shared.attention_out_dx);
  intermediate.use_grad_buffer(shared.intermediate_dx);
  gelu.use_grad_buffer(shared.gelu_dx);
  output.use_grad_buffer(shared.output_dx);
  attention.share_scratch(shared.attention);
  attention_output.use_sequence_buffers(shared.sequence_rows, shared.sequence_dy);
  output.use_sequence_buffers(shared.sequence_rows, shared.sequence_dy);
  attention.use_sequence_buffers(shared.sequence_whole, shared.sequence_dx);
  attention.use_partial_grad_buffer(shared.partial_dx), intermediate.use_partial_grad_buffer(shared.partial_dx);
  gathered_.use(shared.sequence_whole), scattered_.use(shared.sequence_dx);
  Buffer& result = shared.result[parity];
  da_.use(pre_ln ? result : shared.residual_grad);
  dx_.use(result);
}

void TransformerLayer::share_storage(TransformerLayer& owner) {
  attention.share_storage(owner.attention);
  attention_output.share_storage(owner.attention_output);
  attention_norm.share_storage(owner.attention_norm);
  intermediate.share_storage(owner.intermediate);
  gelu.share_storage(owner.gelu);
  output.share_storage(owner.output);
  output_norm.share_storage(owner.output_norm);
  attention_dropout_.share_storage(owner.attention_dropout_);
  output_dropout_.share_storage(owner.output_dropout_);
  sum1_.share(owner.sum1_), sum2_.share(owner.sum2_);
  gathered_.share_own(owner.gathered_), scattered_.share_own(owner.scattered_), norm_grads_.share(owner.norm_grads_);
  da_.share_own(owner.da_), dx_.share_own(owner.dx_);
}

Tensor TransformerLayer::forward(const Step& step, const Tensor& x, const Tensor& mask) {
  Context& ctx = *step.ctx;
  const int64_t B = mask.dim(0);
  B_ = B;
  Tensor sum1 = sum1_.get(*step.ctx, x.shape, x.dtype), sum2 = sum2_.get(*step.ctx, x.shape, x.dtype);  // (B*S, H)
  // Sequence parallel: each sample's rows here start at this rank's first position.
  const int64_t offset = tp_.sequence ? tp_.sequence->first_position() * x.dim(1) : 0;
  attention_dropout_.element_offset = output_dropout_.element_offset = offset;
  if (!pre_ln) {
    Tensor c = attention.forward(step, x, mask);
    Tensor o = attention_dropout_.forward(step, attention_output.forward(step, c), B);
    Tensor a = attention_norm.forward(step, x, o, sum1);  // LN(x + o), sum1 = x + o
    Tensor g = gelu.forward(step, intermediate.forward(step, fc1_input(step, a)));
    Tensor m = output_dropout_.forward(step, output.forward(step, g), B);
    return output_norm.forward(step, a, m, sum2);
  }
  Tensor c = attention.forward(step, attention_norm.forward(step, x), mask);
  Tensor o = attention_dropout_.forward(step, attention_output.forward(step, c), B);
  Tensor h = output_norm.forward(step, x, o, sum1);  // LN_out(a), sum1 = a = x + o
  Tensor g = gelu.forward(step, intermediate.forward(step, fc1_input(step, h)));
  Tensor m = output_dropout_.forward(step, output.forward(step, g), B);
  ops::add(ctx, sum1, m, sum2);
  return sum2;
}

Tensor TransformerLayer::fc1_input(const Step& step, const Tensor& a) {
  fc1_rows_ = a;
  return tp_.sequence ? tp_.sequence->gather(*step.ctx, a, gathered_.buffer()) : a;
}

Tensor TransformerLayer::fc1_backward(const Step& step, const Tensor& dgelu) {
  tp_.sequence->gather(*step.ctx, fc1_rows_, gathered_.buffer());  // the whole input again, where FC1 reads it
  return tp_.sequence->scatter_sum(*step.ctx, intermediate.backward(step, dgelu), scattered_.buffer());
}

void TransformerLayer::fc1_backward_into(const Step& step, const Tensor& dgelu, Tensor& da) {
  if (!tp_.sequence) return intermediate.backward_into(step, dgelu, da, true);
  ops::add(*step.ctx, da, fc1_backward(step, dgelu), da);
}

Tensor TransformerLayer::backward(const Step& step, const Tensor& dy) {
  if (!tp_.sequence) return backward_rows(step, dy);
  // The LayerNorms see this rank's rows only: their gradients go to norm_grads_, summed over the
  // group, then added to the parameters' own.
  Context& ctx = *step.ctx;
  const int64_t H = attention_norm.dim;
  Tensor sums = norm_grads_.get(ctx, {4, H});
  ops::fill(ctx, sums, 0.0f);
  const auto row = [&](int64_t i) { return sums.slice_rows(i, i + 1).reshape({H}); };
  attention_norm.grads_into(row(0), row(1));
  output_norm.grads_into(row(2), row(3));
  Tensor dx = backward_rows(step, dy);
  tp_.all_reduce(sums);
  const Param* params[4] = {&attention_norm.weight, &attention_norm.bias, &output_norm.weight, &output_norm.bias};
  for (int64_t i = 0; i < 4; ++i) {
    Tensor g = params[i]->grad();
    ops::add(ctx, g, row(i), g);
  }
  return dx;
}

Tensor TransformerLayer::backward_rows(const Step& step, const Tensor& dy) {
  Tensor da = da_.get(*step.ctx, dy.shape, dy.dtype);  // gradient at the residual stream between blocks
  if (!pre_ln) {
    // da = LN_out'(dy) + W1'(gelu'(...)): the second term accumulates in the matmul.
    output_norm.backward_into(step, dy, da, false);
    Tensor dg = output.backward(step, output_dropout_.backward(step, da));
    fc1_backward_into(step, gelu.backward(step, dg), da);
    // dx = LN_attn'(da) + attention'(...): the second term accumulates in the q/k/v matmuls.
    Tensor dx = dx_.get(*step.ctx, dy.shape, dy.dtype);
    attention_norm.backward_into(step, da, dx, false);
    Tensor dctx = attention_output.backward(step, attention_dropout_.backward(step, dx));
    attention.backward_into(step, dctx, dx, true);
    return dx;
  }
  Tensor dg = output.backward(step, output_dropout_.backward(step, dy));
  const Tensor dgelu = gelu.backward(step, dg);
  const Tensor dl2 = tp_.sequence ? fc1_backward(step, dgelu) : intermediate.backward(step, dgelu);
  ops::copy(*step.ctx, dy, da);
  output_norm.backward_into(step, dl2, da, true);  // da = dy + LN_out'(dl2)
  Tensor dctx = attention_output.backward(step, attention_dropout_.backward(step, da));
  Tensor dl1 = attention.backward(step, dctx);
  attention_norm.backward_into(step, dl1, da, true);  // dx = da + LN_attn'(dl1), in place
  return da;
}

}  // namespace kiln::nn
