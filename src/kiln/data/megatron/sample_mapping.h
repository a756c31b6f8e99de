// data/megatron/sample_mapping.h — how Megatron-LM carves an indexed dataset into BERT samples:
// the --split document ranges, the sample mapping of helpers.cpp build_mapping, and the greedy
// blending index of build_blending_indices (specs/megatron-bert.md §1.5-1.6).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/data/indexed/indexed_dataset.h"

namespace kiln::data::megatron {

// Sentences longer than this exclude their (multi-sentence) document from the mapping.
inline constexpr int32_t kLongSentenceLen = 512;

// "949,50,1" -> weights normalised to sum 1. Exactly three non-negative numbers separated by
// commas with a positive sum; anything else throws kiln::Error naming --split.
std::array<double, 3> parse_split(const std::string& split);

// Document range [begin, end) of split i (0 train, 1 valid, 2 test) of `num_documents`, from the
// cumulative bookends with Python's round-half-even; nullopt for a zero-width split.
std::optional<std::pair<int64_t, int64_t>> split_documents(const std::array<double, 3>& split, int split_index,
                                                           int64_t num_documents);

// One sample: sentences [first, last) of the dataset and its target length (tokens of A + B).
struct SampleTriple {
  int64_t first = 0, last = 0;
  int32_t target = 0;
};

struct MappingOptions {
  int32_t max_len = 509;           // seq_length - 3
  double short_seq_prob = 0.1;
  uint32_t seed = 1234;
  int32_t min_sentences = 2;       // 2 with the binary head, else 1
  int64_t num_samples = 0;         // stop at the start of an epoch once this many exist
  int64_t max_epochs = 2147483646; // Megatron's "unbounded"
};

// build_mapping over documents [doc_begin, doc_end): std::mt19937(seed) target draws, whole
// epochs, then a Fisher-Yates shuffle with std::mt19937_64(seed + 1). Throws kiln::Error naming
// `what` when an epoch yields no samples (Megatron loops forever there).
std::vector<SampleTriple> build_sample_mapping(const IndexedDataset& data, int64_t doc_begin, int64_t doc_end,
                                               const MappingOptions& options, const std::string& what);

// Greedy blend: sample k goes to the dataset maximising w_d * max(k, 1) - count_d (ties to the
// lowest index). Returns (dataset id, sample id within it) per global sample.
std::vector<std::pair<int16_t, int64_t>> build_blending_index(const std::vector<double>& weights, int64_t size);

}  // namespace kiln::data::megatron
