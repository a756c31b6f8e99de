// models/bert.h — BertForPretraining (masked LM + next-sentence heads): the whole model, one
// BertStage (models/bert_stage.h) that is both first and last, over a store of its own. The
// model, its parameter names, its tensor-parallel split and its dropout streams are described
// there; here the store is allocated and the whole model's interface given.
#pragma once
#include <cstdint>

#include "kiln/core/context.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/data/bert/bert_batch.h"
#include "kiln/models/bert_config.h"
#include "kiln/models/bert_stage.h"
#include "kiln/nn/params.h"
#include "kiln/nn/tensor_parallel.h"

namespace kiln::models {

class BertForPretraining {
 public:
  // Registers every parameter in `store` (which must not be allocated yet) and allocates it.
  // Parameter values start at 0; call init_mlperf or load them. `ctx`: the store's device and
  // the context its own ops run on (ParamStore::allocate).
  BertForPretraining(const BertConfig& config, ParamStore& store, Context& ctx = cpu_context(),
                     const nn::TensorParallel& tp = {});

  // init_bert_weights (models/bert_config.h) over the store.
  void init_mlperf(uint64_t seed);

  // Computes both heads and losses for `batch` (B rows of S tokens, P masked slots per row);
  // BertStage::forward.
  BertOutputs forward(const Step& step, const data::BertBatch& batch);
  // Accumulates loss_scale * d(mlm_loss + nsp_loss)/d(param) of the last forward into
  // store.grads (f32); BertStage::backward.
  void backward(const Step& step, float loss_scale = 1.0f);
  // Both, the losses left on the device; graphed as BertStage::forward_backward says. Then
  // read_losses(), or keep_losses into a slot (kLossTotals i64) and read_losses(slot) later.
  void forward_backward(const Step& step, const data::BertBatch& batch, float loss_scale) {
    stage_.forward_backward(step, batch, loss_scale);
  }
  // BertStage::lend_gradients: activations in the gradients' memory where it holds nothing.
  void lend_gradients() { stage_.lend_gradients(); }
  size_t bytes_lent() const { return stage_.bytes_lent(); }
  static constexpr int64_t kLossTotals = BertStage::kLossTotals;
  BertOutputs read_losses() const { return stage_.read_losses(); }
  void keep_losses(Tensor& slot) const { stage_.keep_losses(slot); }
  BertOutputs read_losses(const Tensor& slot) const { return stage_.read_losses(slot); }

  // (B*P, V) of the last forward; this rank's vocab columns under tensor parallelism.
  const Tensor& mlm_logits() const { return stage_.mlm_logits(); }
  const Tensor& nsp_logits() const { return stage_.nsp_logits(); }  // (B, 2); undefined without head
  const BertConfig& config() const { return config_; }

  int64_t flops_per_sample(int seq_len, int max_pred) const;  // bert_flops_per_sample
  // Number of parameter elements (the tied decoder weight counted once).
  static int64_t param_count(const BertConfig& config);

 private:
  BertConfig config_;
  ParamStore& store_;
  BertStage stage_;
};

}  // namespace kiln::models
