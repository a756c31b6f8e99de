#include "kiln/data/bert/text_documents.h"

namespace kiln::data {
namespace {

// Bytes of the character at s[pos] if Python's str.isspace() holds for it, else 0.
size_t python_space_at(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return i < s.size() ? uint8_t(s[i]) : 0; };
  const uint8_t c = byte(pos);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  const uint8_t c1 = byte(pos + 1), c2 = byte(pos + 2);
  if (c == 0xC2 && (c1 == 0x85 || c1 == 0xA0)) return 2;
  if (c == 0xE1 && c1 == 0x9A && c2 == 0x80) return 3;  // U+1680
  if (c == 0xE2 && c1 == 0x80 && ((c2 >= 0x80 && c2 <= 0x8A) || c2 == 0xA8 || c2 == 0xA9 || c2 == 0xAF))
    return 3;                                              // U+2000..200A, 2028, 2029, 202F
  if (c == 0xE2 && c1 == 0x81 && c2 == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && c1 == 0x80 && c2 == 0x80) return 3;  // U+3000
  return 0;
}

}  // namespace

std::string_view python_strip(std::string_view line) {
  size_t begin = 0;
  for (size_t n; begin < line.size() && (n = python_space_at(line, begin)) > 0;) begin += n;
  size_t end = line.size();
  while (end > begin) {
    // The last character starts at the last byte that is not a UTF-8 continuation byte.
    size_t start = end - 1;
    while (start > begin && (uint8_t(line[start]) & 0xC0) == 0x80) --start;
    if (python_space_at(line, start) != end - start) break;
    end = start;
  }
  return line.substr(begin, end - begin);
}

std::vector<DocumentSpan> scan_documents(std::string_view text, uint32_t file) {
  std::vector<DocumentSpan> docs;
  bool open = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (python_strip(text.substr(pos, end - pos)).empty()) {
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
    tokenizer.encode_append(python_strip(text.substr(pos, end - pos)), segment);
    if (!segment.empty()) doc.push_back(std::move(segment));
    pos = end + 1;
  }
  return doc;
}

}  // namespace kiln::data
