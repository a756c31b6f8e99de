#include "kiln/train/recipes/bert_pipeline.h"

#include "kiln/core/error.h"

namespace kiln::train {

BertPipeline::BertPipeline(const models::BertConfig& config, const dist::ParallelGroups& groups,
                           BertDataSource& data, int64_t micro_batch, int64_t micro_batches, int chunks,
                           bool binary_head, ParamStore& store)
    : groups_(groups), data_(data), micro_batch_(micro_batch), binary_head_(binary_head), hidden_(config.hidden),
      chunks_(size_t(chunks)) {
  const int stages = groups.pp->size(), me = groups.pp->rank();
  const int64_t held = micro_batches_in_flight(interleaved_one_f_one_b(stages, me, chunks, micro_batches));
  const nn::TensorParallel tp = nn::TensorParallel::over(*groups.tp);
  store.share_existing(true);
  if (me == stages - 1 && chunks > 1) models::BertStage::add_decoder_copy(config, store, tp);
  for (int c = 0; c < chunks; ++c) {
    const models::StageRange range = models::bert_stage_range(config, c * stages + me, chunks * stages);
    Chunk& chunk = chunks_[size_t(c)];
    for (int64_t k = 0; k < held; ++k)
      chunk.instances.push_back(std::make_unique<models::BertStage>(config, range, store, tp));
    chunk.batches.resize(size_t(held));
    chunk.grad_buffers.resize(size_t(held));
  }
  store.share_existing(false);
  store.allocate(cpu_context());
}

void BertPipeline::load(int chunk, int slot, const Step& step) {
  data_.seek(step.sample_offset);
  data_.next_train(chunks_[size_t(chunk)].batches[size_t(slot)], int(micro_batch_));
}

Tensor BertPipeline::input_buffer(int chunk, int slot, const Step& step) {
  const data::BertBatch& b = chunks_[size_t(chunk)].batches[size_t(slot)];
  models::BertStage& stage = instance(chunk, slot);
  return stage.input_buffer(step, stage.boundary_rows(b.batch, b.seq_len));
}

Tensor BertPipeline::output_grad_buffer(int chunk, int slot, const Step& step) {
  Chunk& c = chunks_[size_t(chunk)];
  const data::BertBatch& b = c.batches[size_t(slot)];
  const int64_t rows = instance(chunk, slot).boundary_rows(b.batch, b.seq_len);
  return c.grad_buffers[size_t(slot)].get(*step.ctx, {rows, hidden_}, step.compute_dtype);
}

Tensor BertPipeline::forward(int chunk, int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) {
  models::BertOutputs out;
  const Tensor y = instance(chunk, slot).forward(step, chunks_[size_t(chunk)].batches[size_t(slot)], input, &out);
  if (losses) {
    losses->loss = out.loss;
    losses->parts = {out.mlm_loss};
    if (binary_head_) losses->parts.push_back(out.nsp_loss);
  }
  return y;
}

Tensor BertPipeline::backward(int chunk, int slot, const Step& step, const Tensor& grad_output, float grad_scale) {
  return instance(chunk, slot).backward(step, grad_output, grad_scale);
}

// The first stage's embedding gradient + the last stage's decoder gradient, on both: the
// single-process gradient of the one tied parameter (under tensor parallelism, of this tp rank's
// vocab rows: the embedding group joins the ranks with the same tp rank).
void BertPipeline::finish_gradients() {
  if (groups_.embedding->size() < 2) return;
  for (const Chunk& chunk : chunks_)
    if (const Param* word = chunk.instances[0]->word_embedding()) {
      Tensor g = word->grad();
      groups_.embedding->all_reduce_sum(g);
      return;
    }
}

// Each chunk in turn: the activation goes round the ring of ranks once per chunk.
models::BertOutputs BertPipeline::evaluate(const Step& step, const data::BertBatch& batch) {
  dist::Communicator& pp = *groups_.pp;
  const int next = (pp.rank() + 1) % pp.size(), previous = (pp.rank() + pp.size() - 1) % pp.size();
  models::BertOutputs out;
  for (Chunk& chunk : chunks_) {
    models::BertStage& stage = *chunk.instances[0];
    Tensor input;
    if (!stage.range().first) {
      input = stage.input_buffer(step, stage.boundary_rows(batch.batch, batch.seq_len));
      pp.recv(input, previous);
    }
    const Tensor y = stage.forward(step, batch, input, &out);
    if (!stage.range().last) pp.send(y, next);
  }
  return out;
}

}  // namespace kiln::train
