#include "kiln/train/recipes/bert_pipeline.h"

#include "kiln/core/error.h"

namespace kiln::train {

BertPipeline::BertPipeline(const models::BertConfig& config, const dist::ParallelGroups& groups,
                           BertDataSource& data, int64_t micro_batch, bool binary_head, ParamStore& store)
    : groups_(groups), data_(data), micro_batch_(micro_batch), binary_head_(binary_head),
      range_(models::bert_stage_range(config, groups.pp->rank(), groups.pp->size())), hidden_(config.hidden) {
  const int held = groups.pp->size() - groups.pp->rank();  // micro-batches in flight on this stage
  const nn::TensorParallel tp = nn::TensorParallel::over(*groups.tp);
  store.share_existing(true);
  for (int k = 0; k < held; ++k)
    instances_.push_back(std::make_unique<models::BertStage>(config, range_, store, tp));
  store.share_existing(false);
  store.allocate(cpu_context());
  batches_.resize(size_t(held));
  grad_buffers_.resize(size_t(held));
}

void BertPipeline::load(int slot, const Step& step) {
  data_.seek(step.sample_offset);
  data_.next_train(batches_[size_t(slot)], int(micro_batch_));
}

Tensor BertPipeline::input_buffer(int slot, const Step& step) {
  const data::BertBatch& b = batches_[size_t(slot)];
  return instances_[size_t(slot)]->input_buffer(step, instances_[size_t(slot)]->boundary_rows(b.batch, b.seq_len));
}

Tensor BertPipeline::output_grad_buffer(int slot, const Step& step) {
  const data::BertBatch& b = batches_[size_t(slot)];
  const int64_t rows = instances_[size_t(slot)]->boundary_rows(b.batch, b.seq_len);
  return grad_buffers_[size_t(slot)].get(*step.ctx, {rows, hidden_}, step.compute_dtype);
}

Tensor BertPipeline::forward(int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) {
  models::BertOutputs out;
  const Tensor y = instances_[size_t(slot)]->forward(step, batches_[size_t(slot)], input, &out);
  if (losses) {
    losses->loss = out.loss;
    losses->parts = {out.mlm_loss};
    if (binary_head_) losses->parts.push_back(out.nsp_loss);
  }
  return y;
}

Tensor BertPipeline::backward(int slot, const Step& step, const Tensor& grad_output, float grad_scale) {
  return instances_[size_t(slot)]->backward(step, grad_output, grad_scale);
}

// The first stage's embedding gradient + the last stage's decoder gradient, on both: the
// single-process gradient of the one tied parameter (under tensor parallelism, of this tp rank's
// vocab rows: the embedding group joins the ranks with the same tp rank).
void BertPipeline::finish_gradients() {
  const Param* word = instances_[0]->word_embedding();
  if (!word || groups_.embedding->size() < 2) return;
  Tensor g = word->grad();
  groups_.embedding->all_reduce_sum(g);
}

models::BertOutputs BertPipeline::evaluate(const Step& step, const data::BertBatch& batch) {
  dist::Communicator& pp = *groups_.pp;
  models::BertStage& stage = *instances_[0];
  Tensor input;
  if (!range_.first) {
    input = stage.input_buffer(step, stage.boundary_rows(batch.batch, batch.seq_len));
    pp.recv(input, pp.rank() - 1);
  }
  models::BertOutputs out;
  const Tensor y = stage.forward(step, batch, input, &out);
  if (!range_.last) pp.send(y, pp.rank() + 1);
  return out;
}

}  // namespace kiln::train
