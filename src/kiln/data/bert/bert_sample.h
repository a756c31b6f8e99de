// data/bert/bert_sample.h — one MLPerf BERT pretraining sample before padding.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::data {

struct BertSample {
  std::vector<int32_t> input_ids;        // (L) [CLS] A [SEP] B [SEP], masked
  std::vector<uint8_t> segment_ids;      // (L) 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int32_t> masked_positions; // (n) ascending
  std::vector<int32_t> masked_ids;       // (n) the original tokens at those positions
  int32_t next_sentence_label = 0;       // 1 = B is a random next sentence
};

}  // namespace kiln::data
