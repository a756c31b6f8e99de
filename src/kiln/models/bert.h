// models/bert.h — BertForPreTraining (masked LM + next-sentence heads) on kiln's layers, with
// Hugging Face parameter names; post-LN (original BERT) or pre-LN (Megatron).
//
// Post-LN: LN(word[ids] + pos[s] + type[seg]) -> dropout -> post-LN layers (erf GELU).
// Pre-LN:  (word[ids] + pos[s] + type[seg]) -> dropout -> pre-LN layers (tanh GELU in the MLP)
//          -> final LayerNorm `bert.encoder.LayerNorm` (Megatron's encoder.final_layernorm).
// Heads:   pooler tanh(dense(h[:, 0])) -> cls.seq_relationship (B, 2)          (binary_head)
//          h at masked positions -> dense -> erf GELU -> LayerNorm -> x Wword^T + cls.predictions.bias
// The MLM decoder weight IS bert.embeddings.word_embeddings.weight (one parameter, both
// gradients add). Losses: nn::MlmLoss (weighted mean over masked slots) + nn::NspLoss (mean
// over rows with label != -1); total = mlm + nsp.
// Tensor parallel (spec §3.2, `tp` of the constructor): the encoder layers split as
// nn::TransformerLayer says, the word embedding (= decoder weight) and the decoder bias split
// by vocab rows, the MLM loss vocab-parallel (nn/vocab_parallel_loss.h); everything else is
// replicated, counted in gradient norms on tp rank 0 only (ParamSpec::norm_owner).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/data/bert/bert_batch.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/gelu.h"
#include "kiln/nn/layernorm.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/losses.h"
#include "kiln/nn/tanh.h"
#include "kiln/nn/tensor_parallel.h"
#include "kiln/nn/vocab_parallel_loss.h"
#include "kiln/nn/transformer.h"

namespace kiln::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden = 1024, layers = 24, heads = 16, intermediate = 4096,
          max_position = 512, type_vocab = 2;
  float hidden_dropout = 0.1f, attention_dropout = 0.1f, layer_norm_eps = 1e-12f,
        init_std = 0.02f;
  bool pre_ln = false;
  bool binary_head = true;  // pooler + next-sentence head; without it nsp_loss is 0
  // Megatron's selective recomputation: one set of attention-core buffers (B, heads, S, S)
  // for all layers instead of one per layer; backward recomputes the core.
  bool recompute_attention = false;
};

struct BertOutputs {
  double loss = 0, mlm_loss = 0, nsp_loss = 0;
  int64_t mlm_correct = 0;     // masked slots with weight > 0 predicted right
  double mlm_weight_sum = 0;   // sum of masked_weights
  int64_t nsp_correct = 0, nsp_count = 0;  // over rows with nsp label != -1
};

// MLPerf initialisation of every parameter in `store` (BertForPretraining::init_mlperf): by
// name and element, so a pipeline stage's parameters get the values of the whole model's.
void init_bert_weights(ParamStore& store, uint64_t seed, float init_std);
// Training FLOPs of one sample (forward + backward = 3 x forward; a matmul with k weights
// costs 2k per row forward):
//   6 x [ S x layers x (4 H^2 + 2 H I)      encoder projections and MLP, every token
//        + max_pred x (H^2 + H V)            MLM transform and decoder, masked slots only
//        + (H^2 + 2 H) if binary_head ]      pooler and NSP, one row
//   + 12 x layers x S^2 x H                  attention scores Q K^T and probs V
// Biases, LayerNorm, softmax and embeddings are not counted.
int64_t bert_flops_per_sample(const BertConfig& config, int seq_len, int max_pred);
// Throws kiln::Error for a batch whose sizes disagree or whose ids are outside the model's ranges.
void check_bert_batch(const data::BertBatch& batch, const BertConfig& config);

class BertForPretraining {
 public:
  // Registers every parameter in `store` (which must not be allocated yet) and allocates it.
  // Parameter values start at 0; call init_mlperf or load them. `ctx`: the store's device and
  // the context its own ops run on (ParamStore::allocate).
  BertForPretraining(const BertConfig& config, ParamStore& store, Context& ctx = cpu_context(),
                     const nn::TensorParallel& tp = {});

  // MLPerf initialisation: every Linear / Embedding weight (the parameters with decay) =
  // init_std x truncated_normal(seed, parameter name, element) (core/init.h); biases 0;
  // LayerNorm weight 1, bias 0. Independent of thread count and parameter order; a
  // tensor-parallel part draws the whole parameter's elements (ParamSpec::full_shape).
  void init_mlperf(uint64_t seed);

  // Computes both heads and losses for `batch` (B rows of S tokens, P masked slots per row).
  // Activations run in step.compute_dtype (the store's compute dtype), statistics and the
  // MLM / NSP logits in f32. Throws kiln::Error for inconsistent sizes or ids out of range.
  BertOutputs forward(const Step& step, const data::BertBatch& batch);
  // Accumulates loss_scale * d(mlm_loss + nsp_loss)/d(param) of the last forward into
  // store.grads (f32). Each micro-batch's loss is normalised by its own MLM weight sum and NSP row
  // count, so accumulating micro-batches with loss_scale 1/k averages their losses' gradients.
  void backward(const Step& step, float loss_scale = 1.0f);

  // (B*P, V) of the last forward; this rank's vocab columns under tensor parallelism.
  const Tensor& mlm_logits() const { return mlm_logits_; }
  const Tensor& nsp_logits() const { return nsp_logits_; }  // (B, 2); undefined without head
  const BertConfig& config() const { return config_; }

  int64_t flops_per_sample(int seq_len, int max_pred) const;  // bert_flops_per_sample
  // Number of parameter elements (the tied decoder weight counted once).
  static int64_t param_count(const BertConfig& config);

 private:
  BertConfig config_;
  ParamStore& store_;
  nn::TensorParallel tp_;

  nn::Embedding word_, position_, token_type_;
  std::optional<nn::LayerNorm> embedding_norm_;  // post-LN only
  nn::Dropout embedding_dropout_;
  nn::AttentionBuffers shared_attention_;  // used by every layer when recompute_attention
  std::vector<std::unique_ptr<nn::TransformerLayer>> layers_;
  // Where each layer's parameters start in the store, and the heads' (Step::grads_final_from).
  std::vector<int64_t> layer_offsets_;
  int64_t heads_offset_ = 0;
  std::optional<nn::LayerNorm> final_norm_;  // pre-LN only
  std::optional<nn::Linear> pooler_, seq_relationship_;
  nn::Tanh pooler_act_;
  std::optional<nn::Linear> transform_;  // optional only to register parameters in HF order
  nn::Gelu transform_act_;
  std::optional<nn::LayerNorm> transform_norm_;
  Param decoder_bias_;  // cls.predictions.bias (V)
  nn::MlmLoss mlm_loss_;
  nn::VocabParallelMlmLoss vocab_mlm_loss_;
  nn::NspLoss nsp_loss_;

  // Saved by forward for backward.
  int64_t B_ = 0, S_ = 0, P_ = 0;
  std::vector<int32_t> positions_;    // (B*S) position ids
  std::vector<int32_t> gather_rows_;  // (B*P) rows of the sequence output at masked slots
  std::vector<int32_t> first_rows_;   // (B) rows of token 0 of each sample
  Tensor transformed_;                // (B*P, H) input of the decoder
  Tensor mlm_logits_, nsp_logits_;    // f32
  nn::Buffer embeddings_, first_tokens_, gathered_, logits_, nsp_f32_, dlogits_c_, dnsp_c_,
      dtransformed_, dsequence_;
};

}  // namespace kiln::models
