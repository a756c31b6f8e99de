#include "kiln/data/bert/loaders.h"

#include "kiln/core/error.h"
#include "kiln/core/permutation.h"

namespace kiln::data {

BertTrainLoader::BertTrainLoader(const BertSampleSet& set, int batch_size, uint64_t seed)
    : set_(&set), batch_size_(batch_size), seed_(seed) {
  KILN_CHECK(batch_size >= 1, "batch size {} must be at least 1", batch_size);
  KILN_CHECK(set.size() > 0, "training sample set is empty");
}

int64_t BertTrainLoader::sample_at(uint64_t position) const {
  const uint64_t n = uint64_t(set_->size());
  return int64_t(permuted_index(position % n, n, seed_, position / n, 16));
}

void BertTrainLoader::next(BertBatch& batch) {
  batch.resize(batch_size_, set_->seq_len(), set_->max_pred());
  for (int slot = 0; slot < batch_size_; ++slot) {
    const int64_t index = sample_at(position_++);
    set_->read(index, batch, slot);
    check_bert_row(batch, slot, set_->vocab_size(), "BERT training samples", index);
  }
}

BertEvalLoader::BertEvalLoader(const BertSampleSet& set, int batch_size)
    : set_(&set), batch_size_(batch_size) {
  KILN_CHECK(batch_size >= 1, "eval batch size {} must be at least 1", batch_size);
}

bool BertEvalLoader::next(BertBatch& batch) {
  if (position_ >= set_->size()) return false;
  batch.resize(batch_size_, set_->seq_len(), set_->max_pred());
  for (int slot = 0; slot < batch_size_; ++slot) {
    if (position_ < set_->size()) {
      set_->read(position_, batch, slot);
      check_bert_row(batch, slot, set_->vocab_size(), "BERT eval samples", position_);
      ++position_;
    } else {
      batch.clear_row(slot);
    }
  }
  return true;
}

}  // namespace kiln::data
