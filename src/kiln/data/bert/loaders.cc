#include "kiln/data/bert/loaders.h"

#include <algorithm>
#include <bit>

#include "kiln/core/error.h"
#include "kiln/core/philox.h"

namespace kiln::data {
namespace {

// A bijection on [0, n): a balanced Feistel network over the smallest even number of bits
// that covers n, cycle-walking until the value falls inside the range.
uint64_t permute(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  if (n <= 1) return 0;
  const int bits = std::max(2, int(std::bit_width(n - 1)));
  const int half = (bits + 1) / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  constexpr int kRounds = 6;
  uint64_t x = i;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (int r = 0; r < kRounds; ++r) {
      const auto f = philox4x32(seed, rng_stream(RngPurpose::data, 16 + uint32_t(r), epoch), right);
      const uint64_t next = left ^ ((uint64_t(f[0]) << 32 | f[1]) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace

BertTrainLoader::BertTrainLoader(const BertSampleSet& set, int batch_size, uint64_t seed)
    : set_(&set), batch_size_(batch_size), seed_(seed) {
  KILN_CHECK(batch_size >= 1, "batch size {} must be at least 1", batch_size);
  KILN_CHECK(set.size() > 0, "training sample set is empty");
}

int64_t BertTrainLoader::sample_at(uint64_t position) const {
  const uint64_t n = uint64_t(set_->size());
  return int64_t(permute(position % n, n, seed_, position / n));
}

void BertTrainLoader::next(BertBatch& batch) {
  batch.resize(batch_size_, set_->seq_len(), set_->max_pred());
  for (int slot = 0; slot < batch_size_; ++slot) set_->read(sample_at(position_++), batch, slot);
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
      set_->read(position_++, batch, slot);
    } else {
      batch.clear_row(slot);
    }
  }
  return true;
}

}  // namespace kiln::data
