// tests/data/megatron/megatron_test_util.h — a wikitext-2 JSON-lines corpus prepared once into
// an indexed dataset for the Megatron dataset tests.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/data/indexed/prepare_indexed.h"
#include "kiln/data/text/vocab.h"
#include "tests/data/data_test_util.h"

namespace kiln::data::testing {

// wikitext-2 `file` (first `max_bytes`) as JSON lines: each " = Heading = " starts a document.
inline void write_wikitext_jsonl(const std::filesystem::path& out, const std::string& file, size_t max_bytes) {
  std::ifstream in(std::filesystem::path(KILN_SHARED_DATA_DIR) / "wikitext-2" / file);
  std::ofstream jsonl(out);
  std::string line, doc;
  size_t read = 0;
  auto flush = [&] {
    if (doc.find_first_not_of(' ') != std::string::npos) jsonl << nlohmann::json{{"text", doc}}.dump() << "\n";
    doc.clear();
  };
  while (read < max_bytes && std::getline(in, line)) {
    read += line.size() + 1;
    if (line.starts_with(" = ") && !line.starts_with(" = = ")) flush();
    else if (!line.starts_with(" = = ")) doc += line;
  }
  flush();
}

// Prefix of the prepared wikitext corpus (sentence-split), built once per test process.
inline const std::string& wikitext_indexed_prefix() {
  static const std::string prefix = [] {
    const auto dir = fresh_temp_dir("megatron-corpus");
    write_wikitext_jsonl(dir / "wiki.jsonl", "valid.txt", 600000);
    PrepareIndexedOptions o;
    o.input = dir / "wiki.jsonl";
    o.vocab = shared_vocab();
    o.output_prefix = (dir / "wiki").string();
    o.split_sentences = true;
    o.workers = 2;
    o.progress = false;
    return prepare_indexed(o).prefixes.at(0);
  }();
  return prefix;
}

inline const Vocab& shared_vocab_loaded() {
  static const Vocab vocab = Vocab::load(shared_vocab());
  return vocab;
}

}  // namespace kiln::data::testing
