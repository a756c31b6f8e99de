#include "kiln/data/bert/bert_batch.h"

#include <algorithm>

#include "kiln/core/error.h"
#include "kiln/core/philox.h"

namespace kiln::data {

void BertBatch::resize(int batch_size, int seq_length, int max_predictions) {
  batch = batch_size;
  seq_len = seq_length;
  max_pred = max_predictions;
  const size_t bs = size_t(batch) * size_t(seq_len), bp = size_t(batch) * size_t(max_pred);
  input_ids.resize(bs);
  segment_ids.resize(bs);
  input_mask.resize(bs);
  masked_positions.resize(bp);
  masked_ids.resize(bp);
  masked_weights.resize(bp);
  nsp_labels.resize(size_t(batch));
}

void BertBatch::clear_row(int slot) {
  const size_t s0 = size_t(slot) * size_t(seq_len), p0 = size_t(slot) * size_t(max_pred);
  std::fill_n(input_ids.begin() + long(s0), seq_len, 0);
  std::fill_n(segment_ids.begin() + long(s0), seq_len, 0);
  std::fill_n(input_mask.begin() + long(s0), seq_len, 0);
  std::fill_n(masked_positions.begin() + long(p0), max_pred, 0);
  std::fill_n(masked_ids.begin() + long(p0), max_pred, 0);
  std::fill_n(masked_weights.begin() + long(p0), max_pred, 0.0f);
  nsp_labels[size_t(slot)] = -1;
}

void check_bert_row(const BertBatch& batch, int slot, int64_t vocab_size, std::string_view source,
                    int64_t sample_index) {
  const int64_t vocab = vocab_size > 0 ? vocab_size : int64_t(INT32_MAX) + 1;
  const size_t s0 = size_t(slot) * size_t(batch.seq_len), p0 = size_t(slot) * size_t(batch.max_pred);
  auto fail = [&](std::string_view what, int64_t value, int pos, std::string_view range) {
    throw Error("{}: sample {}: {} {} at position {} is outside {}", source, sample_index, what,
                value, pos, range);
  };
  // Formatted only for an error: a row that passes allocates nothing.
  const auto ids = [&] { return vocab_size > 0 ? fmt::format("[0, {}) (the vocab)", vocab_size) : "[0, 2^31)"; };
  for (int i = 0; i < batch.seq_len; ++i) {
    const int32_t id = batch.input_ids[s0 + size_t(i)], seg = batch.segment_ids[s0 + size_t(i)];
    if (id < 0 || id >= vocab) fail("input id", id, i, ids());
    if (seg != 0 && seg != 1) fail("segment id", seg, i, "{0, 1}");
  }
  for (int k = 0; k < batch.max_pred; ++k) {
    const int32_t pos = batch.masked_positions[p0 + size_t(k)], id = batch.masked_ids[p0 + size_t(k)];
    if (pos < 0 || pos >= batch.seq_len) fail("masked position", pos, k, fmt::format("[0, {})", batch.seq_len));
    if (id < 0 || id >= vocab) fail("masked id", id, k, ids());
  }
  const int32_t label = batch.nsp_labels[size_t(slot)];
  if (label < -1 || label > 1)
    throw Error("{}: sample {}: next-sentence / sentence-order label {} is not -1, 0 or 1", source,
                sample_index, label);
}

void fill_fake_batch(BertBatch& batch, int batch_size, int seq_len, int max_pred, int vocab_size,
                     uint64_t seed, uint64_t step) {
  batch.resize(batch_size, seq_len, max_pred);
  const RngStream rng{seed, rng_stream(RngPurpose::fake_data, 0, step)};
  uint64_t k = 0;
  for (int b = 0; b < batch_size; ++b) {
    for (int s = 0; s < seq_len; ++s) {
      const size_t i = size_t(b) * size_t(seq_len) + size_t(s);
      batch.input_ids[i] = int32_t(rng.below(k++, uint64_t(vocab_size)));
      batch.segment_ids[i] = s >= seq_len / 2 ? 1 : 0;
      batch.input_mask[i] = 1;
    }
    for (int p = 0; p < max_pred; ++p) {
      const size_t i = size_t(b) * size_t(max_pred) + size_t(p);
      batch.masked_positions[i] = int32_t(rng.below(k++, uint64_t(seq_len)));
      batch.masked_ids[i] = int32_t(rng.below(k++, uint64_t(vocab_size)));
      batch.masked_weights[i] = 1.0f;
    }
    batch.nsp_labels[size_t(b)] = int32_t(rng.below(k++, 2));
  }
}

}  // namespace kiln::data
