// train/recipes/bert_pipeline.h — BERT as one stage of a pipeline (models/bert_stage.h) for the
// 1F1B schedule (train/pipeline_schedule.h): P - stage instances of the stage's layers over one
// ParamStore (shared weights and gradients, one micro-batch's saved state each), the data every
// stage reads for itself (the same samples: the first stage needs the ids, every stage the
// attention mask, the last the labels), the tied word embedding's gradient summed over the
// embedding group after backward, and forward-only evaluation through the stages.
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
  // Registers this rank's stage (groups.pp's rank) in `store` and allocates it on the host, where
  // the weights are initialised (the recipe moves the store to its device afterwards).
  BertPipeline(const models::BertConfig& config, const dist::ParallelGroups& groups, BertDataSource& data,
               int64_t micro_batch, bool binary_head, ParamStore& store);

  int slots() const override { return int(instances_.size()); }
  void load(int slot, const Step& step) override;
  Tensor input_buffer(int slot, const Step& step) override;
  Tensor output_grad_buffer(int slot, const Step& step) override;
  Tensor forward(int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) override;
  Tensor backward(int slot, const Step& step, const Tensor& grad_output, float grad_scale) override;
  void finish_gradients() override;

  // Forward-only evaluation of `batch` through every stage (all ranks of the pipeline call it
  // with the same batch); the last stage returns the outputs, the others zeros.
  models::BertOutputs evaluate(const Step& step, const data::BertBatch& batch);
  bool last() const { return range_.last; }

 private:
  void send_output(const Tensor& y);

  const dist::ParallelGroups& groups_;
  BertDataSource& data_;
  int64_t micro_batch_;
  bool binary_head_;
  models::StageRange range_;
  int64_t hidden_;
  std::vector<std::unique_ptr<models::BertStage>> instances_;
  std::vector<data::BertBatch> batches_;
  std::vector<nn::Buffer> grad_buffers_;
};

}  // namespace kiln::train
