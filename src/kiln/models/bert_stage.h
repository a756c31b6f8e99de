// models/bert_stage.h — THE BERT implementation: a contiguous part of BertForPretraining
// (models/bert.h) on kiln's layers, with Hugging Face parameter names; post-LN (original BERT) or
// pre-LN (Megatron). The whole model is the one stage that is first and last; a pipeline stage
// follows Megatron's split (../shared/specs/megatron-bert.md §3.3): stage p of P holds the
// encoder layers [p L / P, (p + 1) L / P); the first stage also the embeddings (and the embedding
// LayerNorm, post-LN), the last the final LayerNorm (pre-LN), the pooler and both heads with
// their losses.
//
// Post-LN: LN(word[ids] + pos[s] + type[seg]) -> dropout -> post-LN layers (erf GELU).
// Pre-LN:  (word[ids] + pos[s] + type[seg]) -> dropout -> pre-LN layers (tanh GELU in the MLP)
//          -> final LayerNorm `bert.encoder.LayerNorm` (Megatron's encoder.final_layernorm).
// Heads:   pooler tanh(dense(h[:, 0])) -> cls.seq_relationship (B, 2)          (binary_head)
//          h at masked positions -> dense -> erf GELU -> LayerNorm -> x Wword^T + cls.predictions.bias
// Losses: nn::MlmLoss (weighted mean over masked slots) + nn::NspLoss (mean over rows with
// label != -1); total = mlm + nsp. Parameter names, initialisation (init_bert_weights) and dropout
// streams (layer n keeps 4n+1..4n+3, stream 0 is the embedding dropout; global sample keys) do
// not depend on the split, so a stage computes exactly the part of the whole model it holds.
//
// Tied word embeddings: the MLM decoder weight IS bert.embeddings.word_embeddings.weight. A stage
// that is first and last holds it once (both gradients add); a last stage that is not first holds
// its own copy, initialised identically and marked norm_owner = false; the training side sums its
// gradient with the first stage's over the embedding group (train/recipes/bert_pipeline.h), so
// both copies stay identical.
//
// Sequence parallel (config.sequence_parallel with tp): the layers run on this rank's positions
// (nn/sequence_parallel.h); the embeddings are computed whole and this rank's rows taken, the last
// layer's output is gathered whole for the final LayerNorm and the heads, and a stage's input and
// output between pipeline stages are this rank's rows, (B*S/t, H).
//
// Tensor parallel (spec §3.2, `tp`): the encoder layers split as nn::TransformerLayer says, the
// word embedding (and the last stage's decoder copy) and the decoder bias split by vocab rows,
// the MLM loss vocab-parallel (nn/vocab_parallel_loss.h); everything else is replicated, counted
// in gradient norms on tp rank 0 only (ParamSpec::norm_owner).
//
// Full recomputation (config.recompute): a training forward keeps only the input of each group of
// recomputed layers (models::recompute_layout); backward runs the group's forward again, with the
// same dropout masks (Philox keys), before its layers' backward, so the gradients are bitwise those
// of the stage that keeps everything.
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
#include "kiln/models/bert_config.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/dropout.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/gelu.h"
#include "kiln/nn/grad_loan.h"
#include "kiln/nn/graphed_region.h"
#include "kiln/nn/layernorm.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/losses.h"
#include "kiln/nn/params.h"
#include "kiln/nn/sequence_parallel.h"
#include "kiln/nn/tanh.h"
#include "kiln/nn/tensor_parallel.h"
#include "kiln/nn/transformer.h"
#include "kiln/nn/vocab_parallel_loss.h"

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
  BertStage(const BertConfig& config, const StageRange& range, ParamStore& store,
            const nn::TensorParallel& tp = {});

  // First stage: embeds `batch`; other stages: `input` (B*S, H) is the previous stage's output
  // and must stay unchanged until backward (input_buffer gives one per instance). Activations run
  // in step.compute_dtype (the store's compute dtype), statistics and the MLM / NSP logits in
  // f32. Returns the output for the next stage (B*S, H), or, on the last stage, an undefined
  // tensor and the losses in `out`. Throws kiln::Error for inconsistent sizes or ids out of range.
  // forward = stage + forward_staged + read_losses (last stage).
  Tensor forward(const Step& step, const data::BertBatch& batch, const Tensor& input, BertOutputs* out);
  // The host's part of forward: checks `batch`, keeps its sizes and copies what the ops read (ids,
  // positions, mask, gathered rows, labels, weights) to the step's device.
  void stage(const Step& step, const data::BertBatch& batch);
  // The ops of forward over the staged batch; the last stage's losses stay on the device. Nothing
  // here copies between host and device or reads a result, so it can be captured in a graph.
  Tensor forward_staged(const Step& step, const Tensor& input);
  // Last stage, after forward_staged: the losses, read back.
  BertOutputs read_losses() const;
  // Last stage: the last forward's loss totals copied on the device into `slot` (kLossTotals i64:
  // masked-LM, then NSP unless there is no binary head), and the losses read back from such a
  // copy. A training loop keeps one per micro-batch and reads them all after the step.
  static constexpr int64_t kLossTotals = 6;
  void keep_losses(Tensor& slot) const;
  BertOutputs read_losses(const Tensor& slot) const;
  // Last stage: the gradient of loss_scale x its losses; other stages: `dy` is the gradient of
  // the output. Accumulates parameter gradients into store.grads (f32); returns the input's
  // gradient (undefined on the first stage), valid until this instance's next backward. Each
  // micro-batch's loss is normalised by its own MLM weight sum and NSP row count, so accumulating
  // micro-batches with loss_scale 1/k averages their losses' gradients. Tells step.grads_final_from
  // after the heads and after each layer.
  Tensor backward(const Step& step, const Tensor& dy, float loss_scale);
  // The whole model (first and last stage): stage, forward and backward; the losses stay on the
  // device (read_losses, keep_losses). With step.capture_regions, unless gradient buckets watch
  // the backward, everything after the copies in is one graph (nn/graphed_region.h), keyed by the
  // sizes and the loss scale; the layers' own graphs then stay unused.
  void forward_backward(const Step& step, const data::BertBatch& batch, float loss_scale);

  // From now on the encoder layers' training forwards keep their activations in the gradients of
  // the layers below them where those have room (nn/grad_loan.h): the whole model only, for steps
  // of one micro-batch that start with ParamStore::clear_grads(). Before the first forward.
  void lend_gradients();
  size_t bytes_lent() const { return loan_ ? loan_->bytes_lent() : 0; }

  // The rows of a stage's input and output for a batch of B x S: B*S, or this rank's B*S/t under
  // sequence parallelism.
  int64_t boundary_rows(int64_t B, int64_t S) const;
  // Where a received input for this instance lives: (rows, H) in `dtype`.
  Tensor input_buffer(const Step& step, int64_t rows) {
    return input_.get(*step.ctx, {rows, config_.hidden}, step.compute_dtype);
  }
  // Registers the decoder's copy of the word embedding that a last stage which is not the first
  // holds. Registered before any layer of the rank, at the lowest offsets: its gradient is final
  // only once the embedding group has added the first stage's (after backward), so no
  // data-parallel gradient bucket that starts during backward (Step::grads_final_from) may hold
  // it. A stage registers it itself; a rank of several model chunks first (ParamStore::share_existing).
  static Param add_decoder_copy(const BertConfig& config, ParamStore& store, const nn::TensorParallel& tp);
  // The word embedding this stage holds (first: the table; last: the decoder's copy).
  const Param* word_embedding() const;
  const StageRange& range() const { return range_; }
  // Last stage, after forward: (B*P, V) f32, this rank's vocab columns under tensor parallelism;
  // (B, 2) f32, undefined without the binary head.
  const Tensor& mlm_logits() const { return mlm_logits_; }
  const Tensor& nsp_logits() const { return nsp_logits_; }

 private:
  void add_embeddings(ParamStore& store);
  void add_heads(ParamStore& store);
  Tensor embed(const Step& step);
  void heads(const Step& step, const Tensor& x);
  Tensor heads_backward(const Step& step, float loss_scale);
  Tensor layers_forward(const Step& step, const Tensor& x, const Tensor& mask);
  Tensor layers_backward(const Step& step, const Tensor& dy);
  void recompute_group(const Step& step, size_t group);
  BertOutputs outputs(const nn::LossResult& mlm, const nn::LossResult& nsp) const;
  void embed_backward(const Step& step, Tensor dx);

  BertConfig config_;
  StageRange range_;
  ParamStore& store_;
  nn::TensorParallel tp_;
  std::optional<nn::SequenceSplit> sequence_;  // sequence parallel: the row maps (tp_.sequence)
  int64_t vocab_start_ = 0, vocab_rows_ = 0;  // this rank's rows of the word embedding
  // first stage
  std::optional<nn::Embedding> word_, position_, token_type_;
  std::optional<nn::LayerNorm> embedding_norm_;  // post-LN only
  nn::Dropout embedding_dropout_;
  // every stage
  nn::AttentionBuffers shared_attention_;  // used by every layer when recompute_attention
  nn::LayerSharedBuffers shared_layers_;   // what every layer drops again (nn/transformer.h)
  std::vector<std::unique_ptr<nn::TransformerLayer>> layers_;
  // Full recomputation (models::recompute_layout): each layer's input in the last training
  // forward, in input_copies_ where the layout copies it.
  RecomputeLayout recompute_;
  std::vector<nn::Buffer> input_copies_;
  std::vector<Tensor> layer_input_;
  std::optional<nn::GradLoan> loan_;  // lend_gradients()
  nn::GraphedRegion layers_forward_, layers_backward_;  // the stack of layers as graphs
  nn::GraphedRegion micro_batch_;                       // forward_backward as one graph
  // last stage
  std::optional<nn::LayerNorm> final_norm_;  // pre-LN only
  std::optional<nn::Linear> pooler_, seq_relationship_, transform_;
  nn::Tanh pooler_act_;
  nn::Gelu transform_act_;
  std::optional<nn::LayerNorm> transform_norm_;
  Param decoder_weight_, decoder_bias_;  // decoder_weight_: the word embedding or its copy
  nn::MlmLoss mlm_loss_;
  nn::VocabParallelMlmLoss vocab_mlm_loss_;
  nn::NspLoss nsp_loss_;

  // Kept by stage for forward and backward.
  Context* ctx_ = nullptr;
  int64_t B_ = 0, S_ = 0, P_ = 0;
  std::vector<int32_t> positions_, gather_rows_, first_rows_;
  Tensor ids_in_, positions_in_, segments_in_, mask_in_, gather_rows_in_, first_rows_in_;  // on the step's device
  Tensor transformed_, mlm_logits_, nsp_logits_;
  // The batch's ids on the step's device (nn::Buffer::input).
  nn::Buffer input_ids_, position_ids_, segment_ids_, input_mask_, gather_rows_buf_, first_rows_buf_;
  nn::Buffer input_, embeddings_, first_tokens_, gathered_, logits_, nsp_f32_,
      dtransformed_, dsequence_;
  nn::Buffer embedding_rows_, whole_output_, output_grad_rows_, whole_input_grad_;  // sequence parallel
};

}  // namespace kiln::models
