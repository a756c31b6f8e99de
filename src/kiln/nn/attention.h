// nn/attention.h — multi-head self-attention without the output projection (Hugging Face
// BertSelfAttention): q, k, v = x Wq^T + bq, ...; per head (d = hidden / heads)
//   scores = q k^T / sqrt(d) + (1 - mask[key]) * -10000;  probs = softmax(scores) (f32 math);
//   context = dropout(probs) v.
// Heads are read straight out of the (B*S, hidden) layouts of q, k, v and the context is
// written straight into one (strided matmul views): no head split/merge copies.
// Dropout on probs uses stream id `layer_id` (see nn/dropout.h).
// The attention core's (B, heads, S, S) tensors live in AttentionBuffers: each layer's own, or,
// with selective recomputation (Megatron's --recompute-activations), one set shared by all
// layers, and backward recomputes scores, probs and the dropout mask from the saved q and k.
// The dropped probabilities are never saved: backward makes the dropout mask (Philox) again, in the
// op that makes the scores' gradient (ops::attention_probs_backward); forward makes them in the
// softmax's pass (ops::attention_probs_forward).
// What is dropped again within one forward or backward (AttentionScratch) can be shared by the
// layers of a stack, whose forwards and backwards never overlap (share_scratch).
// Tensor parallel: q, k, v column-parallel, split by heads; rank r computes heads
// [r*heads/TP, ...) and their context columns; its probs dropout masks are the whole layer's
// (keyed by the global head).
// The fused core (`core`, nn/attention_core.h; decided at each forward from the device and dtype)
// computes the same in ops::flash_attention_forward / _backward: it keeps no (B, heads, S, S)
// tensor and no AttentionBuffers, saves the context and the rows' log-sum-exp (B, heads, S) f32
// besides q, k, v (with dropout, also its keep bits, a bit an element: 1/16 of a bf16 S x S), and
// with recomputation has nothing to recompute; its dropout masks are the unfused path's, bit for
// bit. f32 on the CPU keeps the unfused path unless `core` says fused.
#pragma once
#include <string>

#include "kiln/nn/attention_core.h"
#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/linear.h"

namespace kiln::nn {

// The attention core's (B, heads, S, S) tensors that backward reads: the scores (f32, softmax'ed
// in place into the probabilities) or the probabilities in bf16 / f16.
struct AttentionBuffers {
  Buffer scores, probs;
};

// What a forward or backward computes and drops again. Two (B, heads, S, S) buffers serve both
// passes, each holding one thing at a time: `f32` the scores where the probabilities are kept in
// a lower precision (forward; only the softmax reads them), then the gradient of the dropped
// probabilities (backward); `dropped` the dropped probabilities (forward, and again in backward,
// made by the op that makes the scores' gradient, until dv). Without dropout, `dropped` holds the
// scores' gradient in a lower precision; with it, that gradient goes over the saved
// probabilities, which nothing reads after it. Then the gradients of q, k, v (B*S, width) and the
// input gradient of backward() (B*S, hidden).
struct AttentionScratch {
  Buffer f32, dropped, dqkv, dx;  // dqkv (3*B*S, width): dq, dk, dv one after another
};

class SelfAttention {
 public:
  // Registers prefix.query / prefix.key / prefix.value .{weight (hidden, hidden), bias (hidden)}.
  // `recompute`: the attention core's buffers, shared with other layers; backward recomputes
  // what forward computed there. Null: the layer keeps its own and saves them.
  SelfAttention(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t heads,
                float attn_dropout, uint32_t layer_id, AttentionBuffers* recompute = nullptr,
                const TensorParallel& tp = {});
  SelfAttention(const SelfAttention&) = delete;  // core_ may point at its own buffers
  SelfAttention& operator=(const SelfAttention&) = delete;

  // x: (B*S, hidden) in the compute dtype, rows ordered (b, s) (sequence parallel: this rank's
  // rows, nn/sequence_parallel.h, as is backward's dx); mask: (B, S) i32 with
  // 1 = token, 0 = padding (read again by a recomputing backward) -> context: (B*S, width).
  // Saves q, k, v (B*S, hidden), and unless recomputing, probs
  // (B, heads, S, S) in the compute dtype (fused: the context and the rows' lse instead).
  Tensor forward(const Step& step, const Tensor& x, const Tensor& mask);
  // dctx: (B*S, hidden) -> dx: (B*S, hidden); accumulates q/k/v weight and bias grads.
  Tensor backward(const Step& step, const Tensor& dctx);
  // backward() writing dx into the caller's tensor, or adding to it when `accumulate`.
  void backward_into(const Step& step, const Tensor& dctx, Tensor& dx, bool accumulate);
  // The temporaries in `scratch` (shared with other layers) instead of the layer's own.
  void share_scratch(AttentionScratch& scratch);
  // Sequence parallel: the whole input (gathered in forward and again in backward) and backward's
  // rows of dx in these buffers (shared with other layers).
  void use_sequence_buffers(Buffer& whole, Buffer& dx_rows) { gathered_.use(whole), scattered_.use(dx_rows); }
  // Tensor parallel: this rank's share of dx before the group sums it, in this buffer.
  void use_partial_grad_buffer(Buffer& part) { partial_dx_.use(part); }
  // Its buffers over `owner`'s (nn::Buffer::share), for a layer never alive at the same time.
  void share_storage(SelfAttention& owner);

  Linear query, key, value;
  int64_t hidden, heads, head_dim;  // heads: this rank's
  int64_t width;                    // heads x head_dim: this rank's context columns
  AttentionCore core = AttentionCore::automatic;

 private:
  // probs_ (B, heads, S, S) from q_, k_ and mask_, the dropout mask keyed, and with_dropped:
  // dropped_ (probs_ itself without dropout). The probabilities and the mask key are the same
  // either way.
  void core_forward(const Step& step, bool with_dropped);
  // q_, k_, v_ = x Wq^T + bq, ... as one batched product (x read for each, the weights and biases
  // at one stride in the flat parameter buffers, where the layers register them one after
  // another) into qkv_ (3*B*S, width): false, with nothing run, where they are not at one stride.
  bool project_together(const Step& step, const Tensor& x);
  // q, k and v's weight and bias gradients from dqkv (3*B*S, width) as one batched product (x read
  // for each), where their gradients lie at one stride and take the same beta; else each layer's.
  void projection_grads(const Step& step, const Tensor& dqkv);
  bool grads_together(const Step& step, const Tensor& dqkv, const Param::GradTarget (&dw)[3]);
  // Whether this forward takes the fused core.
  bool takes_fused(const Context& ctx, DType dtype) const;
  // The fused core: context_ and lse_ from q_, k_, v_; dq, dk, dv from dctx.
  void fused_forward(const Step& step, Tensor& context);
  void fused_backward(const Step& step, const Tensor& dctx, Tensor& dq, Tensor& dk, Tensor& dv);
  // The unfused core's backward: dq, dk, dv from dctx over the (B, heads, S, S) buffers.
  void unfused_backward(const Step& step, const Tensor& dctx, Tensor& dq, Tensor& dk, Tensor& dv);
  // The probabilities' dropout for the ops: its mask, or none (p = 0) when inactive.
  ops::DropoutMask probs_dropout() const { return dropout_on_ ? dropout_.mask() : ops::DropoutMask{}; }

  Dropout dropout_;
  AttentionBuffers own_;
  AttentionBuffers* core_;
  AttentionScratch own_scratch_;
  AttentionScratch* scratch_ = &own_scratch_;
  bool recompute_;
  int64_t first_head_;
  TensorParallel tp_;
  int64_t B_ = 0, S_ = 0;
  Tensor q_, k_, v_;        // (B*S, width): rows of qkv_, or the projections' buffers
  Buffer qkv_;              // (3*B*S, width): q, k, v one after another
  Tensor mask_;             // (B, S) i32, the caller's
  Tensor probs_, dropped_;  // (B, heads, S, S); dropped_ == probs_ when dropout is inactive
  bool dropout_on_ = false;
  bool fused_ = false;      // this forward took the fused core
  Tensor context_, lse_;    // fused: the context (B*S, width) and (B, heads, S) f32
  Tensor keep_;             // fused with dropout: the keep bits (B, heads, S, S / 32 words) i32
  Buffer ctx_, own_lse_, own_keep_;
  BufferSlot partial_dx_;
  Tensor x_rows_;                  // sequence parallel: the input, this rank's rows
  BufferSlot gathered_, scattered_;  // sequence parallel: the whole input, this rank's rows of dx
};

}  // namespace kiln::nn
