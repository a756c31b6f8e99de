#include "kiln/nn/attention.h"

#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

SelfAttention::SelfAttention(ParamStore& store, const std::string& prefix, int64_t hidden,
                             int64_t heads, float attn_dropout, uint32_t layer_id)
    : query(store, prefix + ".query", hidden, hidden),
      key(store, prefix + ".key", hidden, hidden),
      value(store, prefix + ".value", hidden, hidden),
      hidden(hidden),
      heads(heads),
      head_dim(hidden / heads),
      dropout_(attn_dropout, layer_id) {
  KILN_CHECK(heads > 0 && hidden % heads == 0, "{}: hidden size {} is not a multiple of {} heads",
             prefix, hidden, heads);
}

Tensor SelfAttention::forward(const Step& step, const Tensor& x, const int32_t* input_mask,
                              int64_t B, int64_t S) {
  KILN_CHECK(x.rank() == 2 && x.dim(0) == B * S && x.dim(1) == hidden,
             "SelfAttention {}: input {} is not ({}*{}, {})", query.weight.spec().name,
             shape_str(x.shape), B, S, hidden);
  B_ = B;
  S_ = S;
  const int64_t d = head_dim, BH = B * heads;
  Tensor key_bias = key_bias_.get({B, S});  // (B, S): 0 for tokens, -10000 for padding
  for (int64_t i = 0; i < B * S; ++i) key_bias.ptr<float>()[i] = input_mask[i] ? 0.0f : -10000.0f;

  Tensor qh = qh_.get({B, heads, S, d}), kh = kh_.get({B, heads, S, d});
  Tensor vh = vh_.get({B, heads, S, d});
  ops::split_heads(query.forward(step, x).ptr<float>(), B, S, heads, d, qh.ptr<float>());
  ops::split_heads(key.forward(step, x).ptr<float>(), B, S, heads, d, kh.ptr<float>());
  ops::split_heads(value.forward(step, x).ptr<float>(), B, S, heads, d, vh.ptr<float>());

  // probs (B*heads, S, S) = softmax(q k^T / sqrt(d) + key_bias)
  probs_ = probs_buf_.get({B, heads, S, S});
  ops::gemm_batched(false, true, S, S, d, 1.0f / std::sqrt(float(d)), qh.ptr<float>(), d, S * d,
                    kh.ptr<float>(), d, S * d, 0.0f, probs_.ptr<float>(), S, S * S, BH);
  ops::masked_softmax_forward(probs_.ptr<float>(), key_bias.ptr<float>(), B, heads, S, S,
                              probs_.ptr<float>());
  dropped_ = dropout_.forward(step, probs_);

  Tensor ctxh = ctxh_.get({B, heads, S, d});  // dropped probs v
  ops::gemm_batched(false, false, S, d, S, 1.0f, dropped_.ptr<float>(), S, S * S, vh.ptr<float>(),
                    d, S * d, 0.0f, ctxh.ptr<float>(), d, S * d, BH);
  Tensor ctx = ctx_.get({B * S, hidden});
  ops::merge_heads(ctxh.ptr<float>(), B, S, heads, d, ctx.ptr<float>());
  return ctx;
}

Tensor SelfAttention::backward(const Step& step, const Tensor& dctx) {
  const int64_t B = B_, S = S_, d = head_dim, BH = B * heads;
  KILN_CHECK(dctx.numel() == B * S * hidden, "SelfAttention {}: gradient {} is not ({}, {})",
             query.weight.spec().name, shape_str(dctx.shape), B * S, hidden);
  const float* qh = qh_.get({B, heads, S, d}).ptr<float>();
  const float* kh = kh_.get({B, heads, S, d}).ptr<float>();
  const float* vh = vh_.get({B, heads, S, d}).ptr<float>();
  Tensor dctxh = dctxh_.get({B, heads, S, d});
  ops::split_heads(dctx.ptr<float>(), B, S, heads, d, dctxh.ptr<float>());

  // dv = dropped^T dctx;  d(dropped) = dctx v^T
  Tensor dvh = dvh_.get({B, heads, S, d});
  ops::gemm_batched(true, false, S, d, S, 1.0f, dropped_.ptr<float>(), S, S * S,
                    dctxh.ptr<float>(), d, S * d, 0.0f, dvh.ptr<float>(), d, S * d, BH);
  Tensor dprobs = dprobs_.get({B, heads, S, S});
  ops::gemm_batched(false, true, S, S, d, 1.0f, dctxh.ptr<float>(), d, S * d, vh, d, S * d, 0.0f,
                    dprobs.ptr<float>(), S, S * S, BH);
  Tensor dp = dropout_.backward(step, dprobs);
  // d(q k^T) = softmax'(dp) / sqrt(d), written over dprobs
  const float scale = 1.0f / std::sqrt(float(d));
  ops::softmax_backward(probs_.ptr<float>(), dp.ptr<float>(), BH * S, S, scale,
                        dprobs.ptr<float>());
  Tensor dqh = dqh_.get({B, heads, S, d}), dkh = dkh_.get({B, heads, S, d});
  ops::gemm_batched(false, false, S, d, S, 1.0f, dprobs.ptr<float>(), S, S * S, kh, d, S * d,
                    0.0f, dqh.ptr<float>(), d, S * d, BH);
  ops::gemm_batched(true, false, S, d, S, 1.0f, dprobs.ptr<float>(), S, S * S, qh, d, S * d, 0.0f,
                    dkh.ptr<float>(), d, S * d, BH);

  Tensor dq = dq_.get({B * S, hidden}), dk = dk_.get({B * S, hidden});
  Tensor dv = dv_.get({B * S, hidden});
  ops::merge_heads(dqh.ptr<float>(), B, S, heads, d, dq.ptr<float>());
  ops::merge_heads(dkh.ptr<float>(), B, S, heads, d, dk.ptr<float>());
  ops::merge_heads(dvh.ptr<float>(), B, S, heads, d, dv.ptr<float>());
  Tensor dx = dx_.get({B * S, hidden});
  ops::add(query.backward(step, dq).ptr<float>(), key.backward(step, dk).ptr<float>(),
           dx.numel(), dx.ptr<float>());
  ops::add_inplace(dx.ptr<float>(), value.backward(step, dv).ptr<float>(), dx.numel());
  return dx;
}

}  // namespace kiln::nn
