// io/bert_names.h — facts about kiln's BERT parameter names (Hugging Face's) that the checkpoint
// converters share.
#pragma once
#include <string>

namespace kiln::io {

// The parameters whose first dimension is the vocabulary, which kiln may pad
// (--make-vocab-size-divisible-by) and other formats do not: a converter copies only the real
// rows, and padding rows keep their initial values (no token id reaches them).
inline bool is_vocab_sized(const std::string& name) {
  return name == "bert.embeddings.word_embeddings.weight" || name == "cls.predictions.bias";
}

}  // namespace kiln::io
