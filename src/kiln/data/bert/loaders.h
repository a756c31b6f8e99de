// data/bert/loaders.h — batch iterators over a BertSampleSet for training and evaluation.
#pragma once
#include <cstdint>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/data/bert/sample_set.h"

namespace kiln::data {

// Both loaders keep a pointer to the sample set, which must outlive them.

// Endless training batches: each epoch visits every sample once, in a pseudo-random order that
// is a pure function of (seed, epoch) and computed per index (no permutation array), so
// seek(position) resumes with exactly the batches an uninterrupted run would have seen.
class BertTrainLoader {
 public:
  BertTrainLoader(const BertSampleSet& set, int batch_size, uint64_t seed);
  void next(BertBatch& batch);
  uint64_t position() const { return position_; }  // samples consumed so far
  void seek(uint64_t position) { position_ = position; }
  // The sample index at stream position `position`.
  int64_t sample_at(uint64_t position) const;

 private:
  const BertSampleSet* set_;
  int batch_size_;
  uint64_t seed_;
  uint64_t position_ = 0;
};

// The eval set in order; the last partial batch is completed with padding rows
// (masked_weights 0, nsp label -1) so metrics can ignore them.
class BertEvalLoader {
 public:
  BertEvalLoader(const BertSampleSet& set, int batch_size);
  bool next(BertBatch& batch);  // false once every sample has been returned
  void reset() { position_ = 0; }

 private:
  const BertSampleSet* set_;
  int batch_size_;
  int64_t position_ = 0;
};

}  // namespace kiln::data
