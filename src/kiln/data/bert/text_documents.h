// data/bert/text_documents.h — documents in pretraining text: one sentence per line, a blank
// (or whitespace-only) line between documents.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/data/bert/pretraining_instances.h"
#include "kiln/data/text/bert_tokenizer.h"

namespace kiln::data {

struct DocumentSpan {
  uint32_t file = 0;           // index into the caller's list of input files
  uint64_t begin = 0, end = 0; // bytes of the document's lines, blank lines excluded
};

// The documents of `text`, in order.
std::vector<DocumentSpan> scan_documents(std::string_view text, uint32_t file);

// Each line of `text` that tokenizes to something becomes one segment.
Document tokenize_document(std::string_view text, const BertTokenizer& tokenizer);

}  // namespace kiln::data
