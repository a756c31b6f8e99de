// train/bert_data.h — where `kiln train bert` gets its batches: kiln's MLPerf sample shards
// (`kiln prepare bert`), Megatron's indexed datasets (`--data-path`, masked on the fly), or
// generated batches (BENCHMARK / --fake-data). One interface, so the loop does not care.
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/train/config/bert_config.h"

namespace kiln::train {

class BertDataSource {
 public:
  virtual ~BertDataSource() = default;
  int seq_len() const { return seq_len_; }
  int max_pred() const { return max_pred_; }
  // Samples one evaluation covers (capped by what the eval set holds).
  int64_t eval_samples() const { return eval_samples_; }
  // Largest token id the data can hold + 1 (0: unknown).
  int64_t vocab_size() const { return vocab_size_; }

  // The next `batch_size` training samples, from the position in the run's sample order that
  // seek() set (each micro-batch seeks to its first sample's global index).
  virtual void next_train(data::BertBatch& batch, int batch_size) = 0;
  virtual void seek(uint64_t position) = 0;

  // Evaluation number `index` (0, 1, ...): begin_eval, then next_eval until it returns false.
  virtual void begin_eval(int64_t index) = 0;
  virtual bool next_eval(data::BertBatch& batch, int batch_size) = 0;

 protected:
  int seq_len_ = 0, max_pred_ = 0;
  int64_t eval_samples_ = 0, vocab_size_ = 0;
};

// Opens the source the (finalized) config names; throws kiln::Error naming the file at fault.
std::unique_ptr<BertDataSource> open_bert_data(const BertTrainConfig& config);

}  // namespace kiln::train
