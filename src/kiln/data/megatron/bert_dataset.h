// data/megatron/bert_dataset.h — Megatron-LM's BERTMaskedWordPieceDataset over MMIDIDX data:
// --data-path blends, --split by documents, the sample mapping, sentence-order prediction and
// dynamic whole-word n-gram masking, producing kiln::data::BertBatch rows.
// Follows specs/megatron-bert.md §1.5-1.8; where it is silent:
//   - a split of zero width (e.g. "100,0,0") or asked for 0 samples gets no dataset (nullptr);
//   - a split of non-zero width with no documents, or whose first epoch has no samples, is an
//     error naming the prefix and split (Megatron hangs there);
//   - index caches (.npy) are not written: building the mapping in C++ takes seconds.
// get() is const and depends only on (seed, index), so any number of loader threads may call it
// and the samples do not depend on thread count.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/data/indexed/indexed_dataset.h"
#include "kiln/data/megatron/sample_mapping.h"
#include "kiln/data/text/vocab.h"

namespace kiln::data::megatron {

// --data-path: "P" / "P1 P2 ..." (no weights) or "w1 P1 w2 P2 ..." (weights, normalised).
struct DataBlend {
  std::vector<std::string> prefixes;
  std::vector<double> weights;  // empty: no weights given
};

// Parses the --data-path words. If the first word is a number the form must be weighted: an
// even count, every other word a non-negative number, the weights summing to a positive
// number. Throws kiln::Error naming --data-path otherwise.
DataBlend parse_data_path(const std::vector<std::string>& words);

struct MegatronDataConfig {
  DataBlend data;
  std::string split = "949,50,1";
  int seq_length = 512;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  bool binary_head = true;
  uint64_t seed = 1234;
  const Vocab* vocab = nullptr;  // special ids, "##" continuations, random-token range
  int64_t train_samples = 0, valid_samples = 0, test_samples = 0;

  // Width of BertBatch::masked_* rows: floor(masked_lm_prob * (seq_length - 3)), at least 1.
  int max_predictions() const;
};

// One split of one prefix: the shuffled sample mapping and the per-sample construction.
class MegatronBertSplit {
 public:
  // Builds the mapping over documents [doc_begin, doc_end) with `num_samples` requested
  // (whole epochs, at most `max_epochs`); `name` (e.g. "data/wiki_text_sentence, train split")
  // names it in errors.
  MegatronBertSplit(std::shared_ptr<const IndexedDataset> data, int64_t doc_begin, int64_t doc_end,
                    const MegatronDataConfig& config, int64_t num_samples, int64_t max_epochs, std::string name);

  int64_t size() const { return int64_t(samples_.size()); }
  const SampleTriple& triple(int64_t index) const { return samples_[size_t(index)]; }
  // Builds sample `index` into row `slot` of `batch` (sized (B, seq_length, >= max_predictions)).
  void get(int64_t index, BertBatch& batch, int slot) const;

 private:
  std::shared_ptr<const IndexedDataset> data_;
  const Vocab* vocab_;
  int seq_length_;
  double masked_lm_prob_;
  bool binary_head_;
  uint64_t seed_;
  std::string name_;
  std::vector<SampleTriple> samples_;
};

// What the trainer reads: one split, possibly blended over several prefixes.
class MegatronBertDataset {
 public:
  // Unblended: size() is the mapping length (whole epochs, >= the samples requested).
  explicit MegatronBertDataset(std::unique_ptr<MegatronBertSplit> single);
  // Blended: `size` samples drawn from `parts` by the greedy blending index.
  MegatronBertDataset(std::vector<std::unique_ptr<MegatronBertSplit>> parts, const std::vector<double>& weights,
                      int64_t size);

  int64_t size() const { return size_; }
  // Throws kiln::Error for an index outside [0, size()).
  void get(int64_t index, BertBatch& batch, int slot) const;
  // (part, index within the part) of global sample `index`.
  std::pair<int, int64_t> locate(int64_t index) const;
  const MegatronBertSplit& part(int i) const { return *parts_[size_t(i)]; }

 private:
  std::vector<std::unique_ptr<MegatronBertSplit>> parts_;
  std::vector<std::pair<int16_t, int64_t>> blend_;  // empty when unblended
  int64_t size_ = 0;
};

struct MegatronBertDatasets {
  std::unique_ptr<MegatronBertDataset> train, valid, test;  // nullptr: no such split
};

// Opens every prefix, splits it by documents and builds the three datasets as Megatron's
// BlendedMegatronDatasetBuilder does (sub-datasets of a weighted blend get
// ceil(ceil(n * w) * 1.005) samples; unweighted blends take one epoch of each, weighted by
// length, capped at the request). Throws kiln::Error for bad config or data.
MegatronBertDatasets build_megatron_bert_datasets(const MegatronDataConfig& config);

}  // namespace kiln::data::megatron
