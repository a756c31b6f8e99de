// models/bert_stage.h — one pipeline stage of BertForPretraining (models/bert.h), Megatron's
// split (../shared/specs/megatron-bert.md §3.3): stage p of P holds the encoder layers
// [p L / P, (p + 1) L / P); the first stage also the embeddings (and the embedding LayerNorm,
// post-LN), the last the final LayerNorm (pre-LN), the pooler and both heads with their losses.
// Parameter names, initialisation (init by name and element) and dropout streams (layer n keeps
// 4n+1..4n+3, global sample keys) are those of the whole model, so a stage computes exactly the
// part of the single-process model that it holds.
//
// Tied word embeddings: the last stage holds its own copy of bert.embeddings.word_embeddings.
// weight as the MLM decoder, initialised identically and marked norm_owner = false; the training
// side sums its gradient with the first stage's (train/recipes/bert_pipeline.h), so both copies
// stay identical.
//
// One BertStage holds the saved state of ONE micro-batch in flight. A 1F1B pipeline keeps up to
// P - p micro-batches in flight on stage p: it makes that many BertStage instances over the same
// ParamStore (ParamStore::share_existing), which share weights and gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/data/bert/bert_batch.h"
#include "kiln/models/bert.h"
#include "kiln/nn/params.h"

namespace kiln::models {

struct StageRange {
  int64_t first_layer = 0, end_layer = 0;  // encoder layers [first_layer, end_layer)
  bool first = true, last = true;          // holds the embeddings / the heads and losses
};
// Stage `stage` of `stages`; throws kiln::Error unless the layers split evenly.
StageRange bert_stage_range(const BertConfig& config, int stage, int stages);

class BertStage {
 public:
  // Registers the stage's parameters in `store` (not allocated yet); the caller allocates it.
  BertStage(const BertConfig& config, const StageRange& range, ParamStore& store);

  // First stage: embeds `batch`; other stages: `input` (B*S, H) is the previous stage's output
  // and must stay unchanged until backward (input_buffer gives one per instance). Returns the
  // output for the next stage (B*S, H), or, on the last stage, an undefined tensor and the
  // losses in `out`.
  Tensor forward(const Step& step, const data::BertBatch& batch, const Tensor& input, BertOutputs* out);
  // Last stage: the gradient of loss_scale x its losses; other stages: `dy` is the gradient of
  // the output. Accumulates parameter gradients; returns the input's gradient (undefined on the
  // first stage), valid until this instance's next backward.
  Tensor backward(const Step& step, const Tensor& dy, float loss_scale);

  // Where a received input for this instance lives: (rows, H) in `dtype`.
  Tensor input_buffer(int64_t rows, DType dtype) { return input_.get({rows, config_.hidden}, dtype); }
  // The word embedding this stage holds (first: the table; last: the decoder's copy).
  const Param* word_embedding() const;
  const StageRange& range() const { return range_; }

 private:
  Tensor embed(const Step& step, const data::BertBatch& batch);
  void heads(const Step& step, const data::BertBatch& batch, const Tensor& x, BertOutputs& out);
  Tensor heads_backward(const Step& step, float loss_scale);

  BertConfig config_;
  StageRange range_;
  ParamStore& store_;
  // first stage
  std::optional<nn::Embedding> word_, position_, token_type_;
  std::optional<nn::LayerNorm> embedding_norm_;  // post-LN only
  nn::Dropout embedding_dropout_;
  // every stage
  nn::AttentionBuffers shared_attention_;
  std::vector<std::unique_ptr<nn::TransformerLayer>> layers_;
  // last stage
  std::optional<nn::LayerNorm> final_norm_;  // pre-LN only
  std::optional<nn::Linear> pooler_, seq_relationship_, transform_;
  nn::Tanh pooler_act_;
  nn::Gelu transform_act_;
  std::optional<nn::LayerNorm> transform_norm_;
  Param decoder_weight_, decoder_bias_;
  nn::MlmLoss mlm_loss_;
  nn::NspLoss nsp_loss_;

  // Saved by forward for backward.
  int64_t B_ = 0, S_ = 0, P_ = 0;
  std::vector<int32_t> positions_, gather_rows_, first_rows_;
  Tensor transformed_, mlm_logits_, nsp_logits_;
  nn::Buffer input_, embeddings_, first_tokens_, gathered_, logits_, nsp_f32_, dlogits_c_, dnsp_c_,
      dtransformed_, dsequence_;
};

}  // namespace kiln::models
