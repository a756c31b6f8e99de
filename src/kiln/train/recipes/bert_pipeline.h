// train/recipes/bert_pipeline.h — BERT as one stage of a pipeline (models/bert_stage.h) for the
// 1F1B schedules (train/pipeline_schedule.h): per model chunk (one, or V when interleaved), as
// many instances of the chunk's layers over one ParamStore as it has micro-batches in flight
// (shared weights and gradients, one micro-batch's saved state each), the data every chunk reads
// for itself (the same samples: the first stage needs the ids, every stage the attention mask,
// the last the labels), the tied word embedding's gradient summed over the embedding group after
// backward, and forward-only evaluation through the stages.
#pragma once
#include <memory>
#include <vector>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/dist/parallel_groups.h"
#include "kiln/models/bert_stage.h"
#include "kiln/train/bert_data.h"
#include "kiln/train/pipeline_schedule.h"

namespace kiln::train {

class BertPipeline final : public PipelineStage {
 public:
  // Registers this rank's chunks (groups.pp's rank; `chunks` virtual stages each) in `store` and
  // allocates them on the host, where the weights are initialised (the recipe moves the store to
  // its device afterwards). `micro_batches`: per pipeline and step.
  BertPipeline(const models::BertConfig& config, const dist::ParallelGroups& groups, BertDataSource& data,
               int64_t micro_batch, int64_t micro_batches, int chunks, bool binary_head, ParamStore& store);

  int chunks() const override { return int(chunks_.size()); }
  int slots() const override { return int(chunks_[0].instances.size()); }
  void load(int chunk, int slot, const Step& step) override;
  Tensor input_buffer(int chunk, int slot, const Step& step) override;
  Tensor output_grad_buffer(int chunk, int slot, const Step& step) override;
  Tensor forward(int chunk, int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) override;
  Tensor backward(int chunk, int slot, const Step& step, const Tensor& grad_output, float grad_scale) override;
  void finish_gradients() override;

  // Forward-only evaluation of `batch` through every stage (all ranks of the pipeline call it
  // with the same batch); the last stage returns the outputs, the others zeros.
  models::BertOutputs evaluate(const Step& step, const data::BertBatch& batch);
  bool last() const { return chunks_.back().instances[0]->range().last; }

 private:
  struct Chunk {
    std::vector<std::unique_ptr<models::BertStage>> instances;  // one per slot
    std::vector<data::BertBatch> batches;
    std::vector<nn::Buffer> grad_buffers;
  };
  models::BertStage& instance(int chunk, int slot) { return *chunks_[size_t(chunk)].instances[size_t(slot)]; }

  const dist::ParallelGroups& groups_;
  BertDataSource& data_;
  int64_t micro_batch_;
  bool binary_head_;
  int64_t hidden_;
  std::vector<Chunk> chunks_;
};

}  // namespace kiln::train
