#include "kiln/data/text/vocab.h"

#include <cctype>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::data {

Vocab Vocab::load(const std::filesystem::path& path) {
  KILN_CHECK(std::filesystem::is_regular_file(path), "vocab file {}: not found", path.string());
  const std::string text = read_file(path);
  std::vector<std::string> tokens;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    size_t last = end;
    while (last > begin && std::isspace(static_cast<unsigned char>(text[last - 1]))) --last;
    tokens.emplace_back(text, begin, last - begin);
    begin = end + 1;
  }
  return from_tokens(std::move(tokens), "vocab file " + path.string());
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens, const std::string& origin) {
  KILN_CHECK(!tokens.empty(), "{}: empty", origin);
  Vocab v;
  v.tokens_ = std::move(tokens);
  v.continuation_.resize(v.tokens_.size());
  v.ids_.reserve(v.tokens_.size());
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    v.ids_.emplace(v.tokens_[i], int32_t(i));
    v.continuation_[i] = v.tokens_[i].starts_with("##");
  }
  const auto special = [&](const char* name) {
    const int32_t id = v.id(name);
    KILN_CHECK(id >= 0, "{}: missing special token {}", origin, name);
    return id;
  };
  v.pad_ = special("[PAD]");
  v.unk_ = special("[UNK]");
  v.cls_ = special("[CLS]");
  v.sep_ = special("[SEP]");
  v.mask_ = special("[MASK]");
  return v;
}

int32_t Vocab::id(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& Vocab::token(int32_t id) const {
  KILN_CHECK(id >= 0 && id < size(), "token id {} out of range [0, {})", id, size());
  return tokens_[size_t(id)];
}

}  // namespace kiln::data
