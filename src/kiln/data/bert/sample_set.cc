#include "kiln/data/bert/sample_set.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln::data {

BertSampleSet BertSampleSet::open(const std::filesystem::path& file_or_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(file_or_dir)) {
    for (const auto& entry : fs::directory_iterator(file_or_dir))
      if (entry.is_regular_file() && entry.path().extension() == ".kbs") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    KILN_CHECK(!files.empty(), "sample directory {}: no .kbs files", file_or_dir.string());
  } else {
    KILN_CHECK(fs::exists(file_or_dir), "sample shard {}: not found", file_or_dir.string());
    files.push_back(file_or_dir);
  }
  BertSampleSet set;
  for (const auto& path : files) {
    Shard shard;
    shard.path = path.string();
    shard.file = std::make_shared<MappedFile>(path);
    const ShardHeader h = parse_shard_header(shard.file->data(), shard.file->size(), shard.path);
    const size_t bytes = size_t(h.record_count) * h.layout.record_size();
    KILN_CHECK(crc32_of(shard.file->data() + kShardHeaderSize, bytes) == h.records_crc32,
               "sample shard {}: checksum mismatch in the records (corrupt file)", shard.path);
    if (set.shards_.empty()) {
      set.layout_ = h.layout;
      set.vocab_size_ = h.vocab_size;
    }
    KILN_CHECK(h.layout.max_seq_length == set.layout_.max_seq_length &&
                   h.layout.max_predictions == set.layout_.max_predictions &&
                   h.layout.token_dtype == set.layout_.token_dtype && h.vocab_size == set.vocab_size_,
               "sample shard {}: shape (seq {}, predictions {}, vocab {}) differs from {}", shard.path,
               h.layout.max_seq_length, h.layout.max_predictions, h.vocab_size, set.shards_[0].path);
    shard.first = set.total_;
    shard.count = int64_t(h.record_count);
    set.total_ += shard.count;
    set.shards_.push_back(std::move(shard));
  }
  return set;
}

SampleView BertSampleSet::view(int64_t index) const {
  KILN_CHECK(index >= 0 && index < total_, "sample index {} out of range [0, {})", index, total_);
  const auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                                   [](int64_t i, const Shard& s) { return i < s.first; }) - 1;
  const size_t offset = kShardHeaderSize + size_t(index - it->first) * layout_.record_size();
  return SampleView{it->file->data() + offset, &layout_};
}

void BertSampleSet::read(int64_t index, BertBatch& batch, int slot) const {
  KILN_CHECK(batch.seq_len == seq_len() && batch.max_pred == max_pred() && slot >= 0 && slot < batch.batch,
             "batch ({}, {}, {}) does not fit samples of ({}, {}) at row {}", batch.batch,
             batch.seq_len, batch.max_pred, seq_len(), max_pred(), slot);
  const SampleView v = view(index);
  const int length = v.length(), npred = v.num_predictions();
  KILN_CHECK(length <= seq_len() && npred <= max_pred(), "sample {}: corrupt record (length {}, {} predictions)",
             index, length, npred);
  const size_t s0 = size_t(slot) * size_t(seq_len()), p0 = size_t(slot) * size_t(max_pred());
  for (int i = 0; i < seq_len(); ++i) {
    batch.input_ids[s0 + size_t(i)] = v.input_id(i);
    batch.segment_ids[s0 + size_t(i)] = v.segment_id(i);
    batch.input_mask[s0 + size_t(i)] = i < length ? 1 : 0;
  }
  for (int k = 0; k < max_pred(); ++k) {
    batch.masked_positions[p0 + size_t(k)] = v.masked_position(k);
    batch.masked_ids[p0 + size_t(k)] = v.masked_id(k);
    batch.masked_weights[p0 + size_t(k)] = k < npred ? 1.0f : 0.0f;
  }
  batch.nsp_labels[size_t(slot)] = v.next_sentence_label();
}

}  // namespace kiln::data
