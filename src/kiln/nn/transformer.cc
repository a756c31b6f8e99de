#include "kiln/nn/transformer.h"

#include "kiln/backend/backend.h"

namespace kiln::nn {

TransformerLayer::TransformerLayer(ParamStore& store, const std::string& prefix, int64_t hidden,
                                   int64_t heads, int64_t intermediate_size,
                                   float hidden_dropout, float attn_dropout, bool pre_ln,
                                   GeluKind gelu_kind, uint32_t layer_id)
    : attention(store, prefix + ".attention.self", hidden, heads, attn_dropout, 4 * layer_id + 1),
      attention_output(store, prefix + ".attention.output.dense", hidden, hidden),
      attention_norm(store, prefix + ".attention.output.LayerNorm", hidden),
      intermediate(store, prefix + ".intermediate.dense", hidden, intermediate_size),
      gelu(gelu_kind),
      output(store, prefix + ".output.dense", intermediate_size, hidden),
      output_norm(store, prefix + ".output.LayerNorm", hidden),
      pre_ln(pre_ln),
      attention_dropout_(hidden_dropout, 4 * layer_id + 2),
      output_dropout_(hidden_dropout, 4 * layer_id + 3) {}

Tensor TransformerLayer::forward(const Step& step, const Tensor& x, const int32_t* mask,
                                 int64_t B, int64_t S) {
  const int64_t n = x.numel();
  Tensor sum1 = sum1_.get(x.shape), sum2 = sum2_.get(x.shape);  // (B*S, H)
  if (!pre_ln) {
    Tensor ctx = attention.forward(step, x, mask, B, S);
    Tensor o = attention_dropout_.forward(step, attention_output.forward(step, ctx));
    ops::add(x.ptr<float>(), o.ptr<float>(), n, sum1.ptr<float>());
    Tensor a = attention_norm.forward(step, sum1);
    Tensor g = gelu.forward(step, intermediate.forward(step, a));
    Tensor m = output_dropout_.forward(step, output.forward(step, g));
    ops::add(a.ptr<float>(), m.ptr<float>(), n, sum2.ptr<float>());
    return output_norm.forward(step, sum2);
  }
  Tensor ctx = attention.forward(step, attention_norm.forward(step, x), mask, B, S);
  Tensor o = attention_dropout_.forward(step, attention_output.forward(step, ctx));
  ops::add(x.ptr<float>(), o.ptr<float>(), n, sum1.ptr<float>());  // a
  Tensor g = gelu.forward(step, intermediate.forward(step, output_norm.forward(step, sum1)));
  Tensor m = output_dropout_.forward(step, output.forward(step, g));
  ops::add(sum1.ptr<float>(), m.ptr<float>(), n, sum2.ptr<float>());
  return sum2;
}

Tensor TransformerLayer::backward(const Step& step, const Tensor& dy) {
  const int64_t n = dy.numel();
  Tensor da = dsum1_.get(dy.shape);  // gradient at the residual stream between the blocks
  Tensor dx = dx_.get(dy.shape);
  if (!pre_ln) {
    Tensor ds2 = output_norm.backward(step, dy);
    Tensor dg = output.backward(step, output_dropout_.backward(step, ds2));
    Tensor dh = intermediate.backward(step, gelu.backward(step, dg));
    ops::add(dh.ptr<float>(), ds2.ptr<float>(), n, da.ptr<float>());
    Tensor ds1 = attention_norm.backward(step, da);
    Tensor dctx = attention_output.backward(step, attention_dropout_.backward(step, ds1));
    ops::add(attention.backward(step, dctx).ptr<float>(), ds1.ptr<float>(), n, dx.ptr<float>());
    return dx;
  }
  Tensor dg = output.backward(step, output_dropout_.backward(step, dy));
  Tensor dl2 = intermediate.backward(step, gelu.backward(step, dg));
  ops::add(output_norm.backward(step, dl2).ptr<float>(), dy.ptr<float>(), n, da.ptr<float>());
  Tensor dctx = attention_output.backward(step, attention_dropout_.backward(step, da));
  Tensor dl1 = attention.backward(step, dctx);
  ops::add(attention_norm.backward(step, dl1).ptr<float>(), da.ptr<float>(), n, dx.ptr<float>());
  return dx;
}

}  // namespace kiln::nn
