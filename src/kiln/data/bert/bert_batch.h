// data/bert/bert_batch.h — a batch of BERT pretraining samples as dense host arrays.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::data {

struct BertBatch {
  int batch = 0, seq_len = 0, max_pred = 0;
  std::vector<int32_t> input_ids, segment_ids, input_mask;  // (B, S)
  std::vector<int32_t> masked_positions, masked_ids;        // (B, P)
  std::vector<float> masked_weights;                        // (B, P) 1 for real predictions
  std::vector<int32_t> nsp_labels;                          // (B) 1 = random next; -1 = padding row

  // Sizes every array for (batch, seq_len, max_pred) without clearing it.
  void resize(int batch_size, int seq_length, int max_predictions);
  // Zeroes row `slot` and marks it as padding (weights 0, nsp label -1).
  void clear_row(int slot);
};

// Random ids and positions for BENCHMARK runs; a pure function of (seed, step) via Philox.
void fill_fake_batch(BertBatch& batch, int batch_size, int seq_len, int max_pred, int vocab_size,
                     uint64_t seed, uint64_t step);

}  // namespace kiln::data
