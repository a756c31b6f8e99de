// nn/transformer.h — one BERT / Megatron encoder layer with Hugging Face parameter names.
//
// Post-LN (BERT, pre_ln = false):
//   a = LN_attn(x + drop(Wo attn(x)));     y = LN_out(a + drop(W2 gelu(W1 a)))
// Pre-LN (Megatron, pre_ln = true), with the same two LayerNorm parameters:
//   a = x + drop(Wo attn(LN_attn(x)));     y = a + drop(W2 gelu(W1 LN_out(a)))
// where LN_attn = prefix.attention.output.LayerNorm (applied BEFORE attention when pre_ln) and
// LN_out = prefix.output.LayerNorm (applied before the MLP when pre_ln). A pre-LN stack needs a
// final LayerNorm after the last layer; that belongs to the model.
//
// Parameters: prefix.attention.self.{query,key,value}, prefix.attention.output.dense,
// prefix.attention.output.LayerNorm, prefix.intermediate.dense (hidden -> intermediate),
// prefix.output.dense (intermediate -> hidden), prefix.output.LayerNorm.
// Dropout stream ids (nn/dropout.h): 4*layer_id + 1 (attention probs), + 2 (attention
// output), + 3 (MLP output); ids 4*k + 0 are free for the model (e.g. embedding dropout).
// recompute_attention: see SelfAttention (selective recomputation of the attention core).
// Tensor parallel (tp): attention and intermediate.dense column-parallel, attention.output.dense
// and output.dense row-parallel (nn/linear.h); LayerNorms, dropouts and residuals replicated, or
// under sequence parallelism (tp.sequence, nn/sequence_parallel.h) on this rank's positions: x,
// y and the gradients are (B*S/t, hidden), the dropout masks those of the whole sequence, and the
// LayerNorms' gradients from this rank's rows are summed over the group in each backward.
#pragma once
#include <string>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/gelu.h"
#include "kiln/nn/layernorm.h"
#include "kiln/nn/linear.h"

namespace kiln::nn {

// What a layer computes and drops again within its own forward or backward, shared by the layers
// of a stack: forwards run one after another and so do backwards, so one set serves them all.
// Forward: the two projections' outputs before dropout and the dropouts' outputs (each read only
// by the next op), and the attention scores where the probabilities are kept in bf16 / f16.
// Backward: every gradient but the layer's result, which alternates between `result[0]` and
// `result[1]` (layer l - 1 reads layer l's while writing its own).
struct LayerSharedBuffers {
  Buffer attention_out, attention_dropped, output_out, output_dropped;
  Buffer residual_grad, result[2];
  Buffer attention_out_dx, attention_dropout_dx, intermediate_dx, gelu_dx, output_dx, output_dropout_dx;
  // Sequence parallel: a column-parallel product's whole input (gathered again in backward), a
  // row-parallel one's output rows and whole dy, an input gradient's rows.
  Buffer sequence_whole, sequence_rows, sequence_dy, sequence_dx;
  Buffer partial_dx;  // tensor parallel: a column-parallel input gradient before the group sums it
  AttentionScratch attention;
};

class TransformerLayer {
 public:
  TransformerLayer(ParamStore& store, const std::string& prefix, int64_t hidden, int64_t heads,
                   int64_t intermediate, float hidden_dropout, float attn_dropout, bool pre_ln,
                   GeluKind gelu, uint32_t layer_id, AttentionBuffers* recompute_attention = nullptr,
                   const TensorParallel& tp = {});

  // x: (B*S, hidden) in the compute dtype; mask: (B, S) i32, 1 = token, 0 = padding ->
  // y: (B*S, hidden). Keeps x and every intermediate needed by backward.
  Tensor forward(const Step& step, const Tensor& x, const Tensor& mask);
  // dy: (B*S, hidden) -> dx: (B*S, hidden); accumulates every parameter gradient. The
  // residual adds of the backward pass are folded into the LayerNorm backward and the
  // matmuls (they accumulate into the residual gradient), so it has no separate add pass.
  Tensor backward(const Step& step, const Tensor& dy);
  // Uses `shared` for what forward and backward drop again (LayerSharedBuffers); `parity`: this
  // layer's index mod 2, so that neighbouring layers' results use different buffers.
  void share_buffers(LayerSharedBuffers& shared, int parity);
  // Every buffer it keeps from forward to backward over `owner`'s (nn::Buffer::share): for a layer
  // whose activations are never alive while `owner`'s are (full recomputation).
  void share_storage(TransformerLayer& owner);

  SelfAttention attention;
  Linear attention_output;   // prefix.attention.output.dense
  LayerNorm attention_norm;  // prefix.attention.output.LayerNorm
  Linear intermediate;       // prefix.intermediate.dense
  Gelu gelu;
  Linear output;             // prefix.output.dense
  LayerNorm output_norm;     // prefix.output.LayerNorm
  bool pre_ln;

 private:
  Tensor backward_rows(const Step& step, const Tensor& dy);
  // The MLP's input for FC1: `a` itself, or under sequence parallelism the whole sequence of it.
  Tensor fc1_input(const Step& step, const Tensor& a);
  // The residual stream's gradient through FC1 (column-parallel): under sequence parallelism this
  // rank's rows of it; or added to `da`.
  Tensor fc1_backward(const Step& step, const Tensor& dgelu);
  void fc1_backward_into(const Step& step, const Tensor& dgelu, Tensor& da);

  TensorParallel tp_;
  Dropout attention_dropout_, output_dropout_;
  int64_t B_ = 0;  // samples in the last forward (dropout keys)
  Buffer sum1_, sum2_;
  // Sequence parallel: FC1's input (this rank's rows), whole and its dx rows; the LayerNorms'
  // gradients (4, hidden) f32.
  Tensor fc1_rows_;
  BufferSlot gathered_, scattered_;
  Buffer norm_grads_;
  BufferSlot da_;  // pre-LN: the layer's result
  BufferSlot dx_;  // post-LN: the layer's result
};

}  // namespace kiln::nn
