// nn/attention.h — multi-head self-attention without the output projection (Hugging Face
// BertSelfAttention): q, k, v = x Wq^T + bq, ...; per head (d = hidden / heads)
//   scores = q k^T / sqrt(d) + (1 - mask[key]) * -10000;  probs = softmax(scores) (fp32);
//   context = dropout(probs) v.
// Dropout on probs uses stream id `layer_id` (see nn/dropout.h).
#pragma once
#include <string>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/linear.h"

namespace kiln::nn {

class SelfAttention {
 public:
  // Registers prefix.query / prefix.key / prefix.value .{weight (hidden, hidden), bias (hidden)}.
  SelfAttention(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t heads,
                float attn_dropout, uint32_t layer_id);

  // x: (B*S, hidden), rows ordered (b, s); input_mask: (B, S) with 1 = token, 0 = padding
  // (read during forward only) -> context: (B*S, hidden). Saves q, k, v (B, heads, S, d),
  // probs and dropped probs (B, heads, S, S).
  Tensor forward(const Step& step, const Tensor& x, const int32_t* input_mask, int64_t B,
                 int64_t S);
  // dctx: (B*S, hidden) -> dx: (B*S, hidden); accumulates q/k/v weight and bias grads.
  Tensor backward(const Step& step, const Tensor& dctx);

  Linear query, key, value;
  int64_t hidden, heads, head_dim;

 private:
  Dropout dropout_;
  int64_t B_ = 0, S_ = 0;
  Tensor probs_, dropped_;  // (B, heads, S, S); dropped_ == probs_ when dropout is inactive
  Buffer key_bias_, qh_, kh_, vh_, probs_buf_, ctxh_, ctx_;
  Buffer dctxh_, dprobs_, dqh_, dkh_, dvh_, dq_, dk_, dv_, dx_;
};

}  // namespace kiln::nn
