#include "kiln/data/bert/text_documents.h"

namespace kiln::data {
namespace {

bool is_blank(std::string_view line) {
  for (const char c : line)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\v' && c != '\f') return false;
  return true;
}

}  // namespace

std::vector<DocumentSpan> scan_documents(std::string_view text, uint32_t file) {
  std::vector<DocumentSpan> docs;
  bool open = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (is_blank(text.substr(pos, end - pos))) {
      open = false;
    } else {
      if (!open) docs.push_back({file, pos, end});
      open = true;
      docs.back().end = end;
    }
    pos = end + 1;
  }
  return docs;
}

Document tokenize_document(std::string_view text, const BertTokenizer& tokenizer) {
  Document doc;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    Segment segment;
    tokenizer.encode_append(text.substr(pos, end - pos), segment);
    if (!segment.empty()) doc.push_back(std::move(segment));
    pos = end + 1;
  }
  return doc;
}

}  // namespace kiln::data
