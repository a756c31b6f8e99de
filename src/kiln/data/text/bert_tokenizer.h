// data/text/bert_tokenizer.h — Google BERT's BasicTokenizer followed by greedy
// longest-match-first WordPiece. Invalid UTF-8 bytes are dropped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/data/text/vocab.h"

namespace kiln::data {

class BertTokenizer {
 public:
  // Words longer than this many code points become [UNK] (Google's max_input_chars_per_word).
  static constexpr size_t kMaxCharsPerWord = 100;

  explicit BertTokenizer(Vocab vocab, bool lower_case = true);

  // Clean, split on whitespace / punctuation / CJK; lower-case and strip accents if enabled.
  std::vector<std::string> basic_tokenize(std::string_view text) const;
  // WordPiece tokens ("##" marks continuations; [UNK] for unmatchable words).
  std::vector<std::string> tokenize(std::string_view text) const;
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to `ids` (no allocation beyond the growth of `ids`).
  void encode_append(std::string_view text, std::vector<int32_t>& ids) const;

  const Vocab& vocab() const { return vocab_; }
  bool lower_case() const { return lower_case_; }

 private:
  std::vector<std::u32string> basic_words(std::string_view text) const;
  void wordpiece(const std::u32string& word, std::vector<int32_t>& ids) const;

  Vocab vocab_;
  bool lower_case_;
};

}  // namespace kiln::data
