// tests/train/wikitext_corpus.h — WikiText-2 (../shared/data) as BERT pretraining text: one
// article per document (headed "= Title ="), one sentence per line, section headings dropped,
// WikiText's " @-@ ", " @,@ ", " @.@ " joins undone and "<unk>" removed.
#pragma once
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "kiln/core/file_util.h"

namespace kiln::testing {

inline void write_wikitext_as_bert_text(const std::filesystem::path& wikitext,
                                        const std::filesystem::path& out_path) {
  std::istringstream in(read_file(wikitext));
  std::ofstream out(out_path);
  const std::regex article(R"(^ = [^=].* = $)"), heading(R"(^ = = .* = = $)");
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (std::regex_match(line, article)) {
      if (!first) out << "\n";
      first = false;
      continue;
    }
    if (std::regex_match(line, heading) || line.find_first_not_of(' ') == std::string::npos)
      continue;
    for (auto [from, to] : {std::pair{" @-@ ", "-"}, {" @,@ ", ","}, {" @.@ ", "."}, {"<unk> ", ""}})
      for (size_t p; (p = line.find(from)) != std::string::npos;) line.replace(p, std::string(from).size(), to);
    size_t start = line.find_first_not_of(' ');
    for (size_t p; (p = line.find(" . ", start)) != std::string::npos; start = p + 3)
      out << line.substr(start, p + 2 - start) << "\n";
    if (start < line.size() && line.find_first_not_of(' ', start) != std::string::npos)
      out << line.substr(start) << "\n";
  }
}

}  // namespace kiln::testing
