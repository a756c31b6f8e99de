#include "kiln/data/text/bert_tokenizer.h"

#include <utf8proc.h>

#include "kiln/data/text/utf8.h"

namespace kiln::data {
namespace {

bool is_whitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return c >= 0x80 && utf8proc_category(int32_t(c)) == UTF8PROC_CATEGORY_ZS;
}

// Google counts only Cc and Cf as control; \t \n \r are whitespace instead.
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  const auto cat = utf8proc_category(int32_t(c));
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF;
}

// ASCII non-alphanumerics count as punctuation even where Unicode calls them symbols.
bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  if (c < 0x80) return false;
  const auto cat = utf8proc_category(int32_t(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(int32_t(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

// Lower-case, NFD, and drop nonspacing marks (Mn), appending to `out`.
void lower_strip_accents(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  const auto lower = utf8proc_tolower(int32_t(c));
  utf8proc_int32_t buf[32];
  int boundclass = 0;
  const auto n = utf8proc_decompose_char(lower, buf, 32, UTF8PROC_DECOMPOSE, &boundclass);
  if (n < 0 || n > 32) {
    out.push_back(char32_t(lower));
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i)
    if (utf8proc_category(buf[i]) != UTF8PROC_CATEGORY_MN) out.push_back(char32_t(buf[i]));
}

}  // namespace

BertTokenizer::BertTokenizer(Vocab vocab, bool lower_case)
    : vocab_(std::move(vocab)), lower_case_(lower_case) {}

std::vector<std::u32string> BertTokenizer::basic_words(std::string_view text) const {
  // Clean text and isolate CJK ideographs in one pass.
  std::u32string clean;
  for (const char32_t c : utf8_decode(text)) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(' ');
    } else if (is_cjk(c)) {
      clean.push_back(' ');
      clean.push_back(c);
      clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  std::vector<std::u32string> words;
  std::u32string token;
  size_t i = 0;
  while (i < clean.size()) {
    if (clean[i] == ' ') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < clean.size() && clean[end] != ' ') ++end;
    token.clear();
    if (lower_case_) {
      for (size_t k = i; k < end; ++k) {
        // Python's lower() turns a word-final capital sigma into the final form.
        const bool final_sigma = clean[k] == 0x3A3 && k > i && is_cased(clean[k - 1]) &&
                                 (k + 1 == end || !is_cased(clean[k + 1]));
        lower_strip_accents(final_sigma ? 0x3C2 : clean[k], token);
      }
    } else {
      token.assign(clean, i, end - i);
    }
    // Every punctuation character becomes its own word.
    std::u32string current;
    for (const char32_t c : token) {
      if (is_punctuation(c)) {
        if (!current.empty()) words.push_back(std::move(current));
        current.clear();
        words.emplace_back(1, c);
      } else {
        current.push_back(c);
      }
    }
    if (!current.empty()) words.push_back(std::move(current));
    i = end;
  }
  return words;
}

void BertTokenizer::wordpiece(const std::u32string& word, std::vector<int32_t>& ids) const {
  if (word.size() > kMaxCharsPerWord) {
    ids.push_back(vocab_.unk_id());
    return;
  }
  // Byte offset of every code point, so candidate pieces are plain substrings.
  std::string bytes;
  std::vector<size_t> offset;
  offset.reserve(word.size() + 1);
  for (const char32_t c : word) {
    offset.push_back(bytes.size());
    utf8_append(bytes, c);
  }
  offset.push_back(bytes.size());

  const size_t first = ids.size();
  std::string piece;
  size_t start = 0;
  while (start < word.size()) {
    int32_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(bytes, offset[start], offset[end] - offset[start]);
      found = vocab_.id(piece);
      if (found >= 0) break;
    }
    if (found < 0) {
      ids.resize(first);
      ids.push_back(vocab_.unk_id());
      return;
    }
    ids.push_back(found);
    start = end;
  }
}

std::vector<std::string> BertTokenizer::basic_tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (const auto& word : basic_words(text)) out.push_back(utf8_encode(word));
  return out;
}

void BertTokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids) const {
  for (const auto& word : basic_words(text)) wordpiece(word, ids);
}

std::vector<int32_t> BertTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_append(text, ids);
  return ids;
}

std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (const int32_t id : encode(text)) out.push_back(vocab_.token(id));
  return out;
}

}  // namespace kiln::data
