#include "kiln/data/text/sentence_splitter.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace kiln::data {

const std::vector<std::string_view> kAbbreviations = {
    "mr",  "mrs", "ms",  "dr",   "prof", "sr",   "jr",  "st", "mt", "ft", "gen", "gov", "sen",
    "rep", "col", "lt",  "sgt",  "capt", "cmdr", "adm", "rev", "hon", "messrs", "mme", "mlle",
    "vs",  "cf",  "viz", "approx", "inc", "ltd", "co", "corp",
    "dept", "univ", "assn", "bros", "vol", "vols", "pp", "fig", "figs", "eq", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "eds", "al"};

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_terminator(char c) { return c == '.' || c == '!' || c == '?'; }
bool is_opener(char c) { return c == '"' || c == '\'' || c == '(' || c == '[' || c == '{'; }

// Length of the UTF-8 sequence at `i` if it is one of the given multi-byte characters, else 0.
size_t match_any(std::string_view s, size_t i, std::initializer_list<std::string_view> options) {
  for (std::string_view o : options)
    if (s.substr(i).starts_with(o)) return o.size();
  return 0;
}

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // …

// Length of a closing quote / bracket at `i`, or 0.
size_t closer_at(std::string_view s, size_t i) {
  const char c = s[i];
  if (c == '"' || c == '\'' || c == ')' || c == ']' || c == '}') return 1;
  return match_any(s, i, {"\xE2\x80\x9D", "\xE2\x80\x99", "\xC2\xBB"});  // ” ’ »
}

bool opens_sentence(std::string_view s, size_t i) {
  const char c = s[i];
  return std::isupper(static_cast<unsigned char>(c)) || is_opener(c) ||
         match_any(s, i, {"\xE2\x80\x9C", "\xE2\x80\x98", "\xC2\xAB"}) > 0;  // “ ‘ «
}

// True if the single '.' at `dot` ends an abbreviation, an initial or a dotted word.
bool period_is_abbreviation(std::string_view text, size_t start, size_t dot) {
  size_t b = dot;
  while (b > start && !is_space(text[b - 1])) --b;
  while (b < dot && is_opener(text[b])) ++b;
  const std::string_view word = text.substr(b, dot - b);
  if (word.empty()) return false;
  if (word.size() == 1) return std::isalpha(static_cast<unsigned char>(word[0])) != 0;
  if (word.find('.') != std::string_view::npos) return true;
  std::string lower(word);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); });
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), lower) != kAbbreviations.end();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0, i = 0;
  auto emit = [&](size_t end) {
    const std::string_view s = trim(text.substr(start, end - start));
    if (!s.empty()) out.push_back(s);
    start = end;
  };
  while (i < text.size()) {
    const size_t ell = match_any(text, i, {kEllipsis});
    if (!is_terminator(text[i]) && ell == 0) {
      ++i;
      continue;
    }
    // The run of terminators [i, j).
    const size_t run_begin = i;
    size_t j = i, dots = 0;
    bool exclaim = false, ellipsis = false;
    while (j < text.size()) {
      if (const size_t e = match_any(text, j, {kEllipsis}); e > 0) {
        ellipsis = true;
        j += e;
      } else if (is_terminator(text[j])) {
        dots += text[j] == '.';
        exclaim |= text[j] != '.';
        ++j;
      } else {
        break;
      }
    }
    ellipsis |= dots >= 2;
    while (j < text.size()) {
      const size_t c = closer_at(text, j);
      if (c == 0) break;
      j += c;
    }
    i = j;
    if (j < text.size() && !is_space(text[j])) continue;
    size_t next = j;
    while (next < text.size() && is_space(text[next])) ++next;
    if (next == text.size()) break;
    if (!exclaim) {
      if (std::islower(static_cast<unsigned char>(text[next]))) continue;
      if (ellipsis && !opens_sentence(text, next)) continue;
      if (!ellipsis && period_is_abbreviation(text, start, run_begin)) continue;
    }
    emit(j);
  }
  emit(text.size());
  return out;
}

}  // namespace kiln::data
