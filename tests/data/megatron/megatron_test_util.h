// tests/data/megatron/megatron_test_util.h — a State of the Union JSON-lines corpus (one address
// per line) prepared once into an indexed dataset for the Megatron dataset tests.
#pragma once
#include <filesystem>
#include <string>

#include "kiln/data/indexed/prepare_indexed.h"
#include "kiln/data/text/vocab.h"
#include "tests/data/data_test_util.h"

namespace kiln::data::testing {

// Prefix of the prepared State of the Union corpus (sentence-split), built once per test process.
inline const std::string& sotu_indexed_prefix() {
  static const std::string prefix = [] {
    const auto dir = fresh_temp_dir("megatron-corpus");
    write_sotu_jsonl(dir / "sotu.jsonl", 600000);
    PrepareIndexedOptions o;
    o.input = dir / "sotu.jsonl";
    o.vocab = test_vocab();
    o.output_prefix = (dir / "sotu").string();
    o.split_sentences = true;
    o.workers = 2;
    o.progress = false;
    return prepare_indexed(o).prefixes.at(0);
  }();
  return prefix;
}

inline const Vocab& test_vocab_loaded() {
  static const Vocab vocab = Vocab::load(test_vocab());
  return vocab;
}

}  // namespace kiln::data::testing
