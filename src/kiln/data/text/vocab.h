// data/text/vocab.h — a WordPiece vocabulary file: one token per line, id = line index.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::data {

class Vocab {
 public:
  // Reads `path`; throws kiln::Error naming it if it is missing, empty, or lacks one of
  // [PAD] [UNK] [CLS] [SEP] [MASK]. A duplicated token keeps its first id.
  static Vocab load(const std::filesystem::path& path);
  // Builds a vocabulary from tokens in id order (same checks as load; `origin` names it).
  static Vocab from_tokens(std::vector<std::string> tokens, const std::string& origin);

  int32_t id(std::string_view token) const;  // -1 if absent
  const std::string& token(int32_t id) const;
  int32_t size() const { return int32_t(tokens_.size()); }
  // True for WordPiece continuations ("##..."), which join the previous word.
  bool is_continuation(int32_t id) const { return continuation_[size_t(id)] != 0; }

  int32_t pad_id() const { return pad_; }
  int32_t unk_id() const { return unk_; }
  int32_t cls_id() const { return cls_; }
  int32_t sep_id() const { return sep_; }
  int32_t mask_id() const { return mask_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::vector<uint8_t> continuation_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  int32_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

}  // namespace kiln::data
