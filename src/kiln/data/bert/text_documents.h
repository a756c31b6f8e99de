// data/bert/text_documents.h — documents in pretraining text: one sentence per line, a blank
// (or whitespace-only) line between documents. Lines end at '\n' and are stripped as the
// reference's line.strip() does, so "whitespace" is Python's (U+00A0, U+2028, ... included).
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

// `line` without leading and trailing characters for which Python's str.isspace() holds.
std::string_view python_strip(std::string_view line);

// The documents of `text`, in order.
std::vector<DocumentSpan> scan_documents(std::string_view text, uint32_t file);

// Each line of `text` that tokenizes to something (after python_strip) becomes one segment.
Document tokenize_document(std::string_view text, const BertTokenizer& tokenizer);

}  // namespace kiln::data
