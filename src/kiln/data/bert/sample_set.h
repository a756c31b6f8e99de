// data/bert/sample_set.h — random access over one or more .kbs sample shards.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/data/bert/mapped_file.h"
#include "kiln/data/bert/sample_shard.h"

namespace kiln::data {

class BertSampleSet {
 public:
  // A .kbs file, or a directory whose *.kbs files are taken in sorted order. Every file's
  // header and records' CRC32 are checked, and all must share one shape; throws kiln::Error
  // naming the file and what is wrong.
  static BertSampleSet open(const std::filesystem::path& file_or_dir);

  int64_t size() const { return total_; }
  int seq_len() const { return layout_.max_seq_length; }
  int max_pred() const { return layout_.max_predictions; }
  uint32_t vocab_size() const { return vocab_size_; }
  // Fills row `slot` of `batch`, which must already be sized for this set's shape.
  void read(int64_t index, BertBatch& batch, int slot) const;
  // The raw record of sample `index`.
  SampleView view(int64_t index) const;

 private:
  struct Shard {
    std::string path;
    std::shared_ptr<MappedFile> file;
    int64_t first = 0, count = 0;
  };
  std::vector<Shard> shards_;
  ShardLayout layout_;
  uint32_t vocab_size_ = 0;
  int64_t total_ = 0;
};

}  // namespace kiln::data
