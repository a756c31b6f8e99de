// data/bert/bert_batch.h — a batch of BERT pretraining samples as dense host arrays.
#pragma once
#include <cstdint>
#include <string_view>
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

// Checks row `slot` as a loader reads it, so that the model's gathers and losses can assume
// valid input: input and masked ids in [0, vocab_size) (vocab_size 0: not recorded, ids only
// >= 0), segment ids 0 or 1, masked positions in [0, seq_len), NSP/SOP label -1, 0 or 1.
// Throws kiln::Error "<source>: sample <index>: ..." naming the first bad value.
void check_bert_row(const BertBatch& batch, int slot, int64_t vocab_size, std::string_view source,
                    int64_t sample_index);

// Random ids and positions for BENCHMARK runs; a pure function of (seed, step) via Philox.
void fill_fake_batch(BertBatch& batch, int batch_size, int seq_len, int max_pred, int vocab_size,
                     uint64_t seed, uint64_t step);

}  // namespace kiln::data
