// data/indexed/prepare_indexed.h — `kiln prepare indexed`: Megatron's tools/preprocess_data.py
// for BERT. JSON lines -> per key `P_<key>_sentence.{bin,idx}` (with sentence splitting) or
// `P_<key>_document.{bin,idx}` (the whole text is one sequence), byte-compatible with Megatron.
//
// Each line is one document. With splitting, the text is cut by split_sentences() (a rule-based
// stand-in for NLTK Punkt); every sentence is WordPiece-encoded and sentences with no tokens
// are dropped; a document with no tokens still gets its (empty) entry. Blank lines are skipped.
// Lines are processed in fixed chunks whose results are written in input order, so the output
// is byte-identical for any worker count.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::data {

struct PrepareIndexedOptions {
  std::filesystem::path input;                   // JSON lines
  std::vector<std::string> json_keys{"text"};
  std::filesystem::path vocab;
  std::string output_prefix;
  bool split_sentences = false;
  bool lower_case = true;
  int workers = 1;
  bool progress = true;                          // progress and MB/s on stderr
};

struct PrepareIndexedResult {
  int64_t documents = 0, sequences = 0, tokens = 0;  // summed over keys
  std::vector<std::string> prefixes;                 // one output prefix per key
};

// The output prefix for `key`: `<prefix>_<key>_sentence` or `<prefix>_<key>_document`.
std::string indexed_output_prefix(const std::string& prefix, const std::string& key, bool split_sentences);

// Throws kiln::Error naming the input and line for malformed JSON, a missing key or a key that
// is not a string; naming the path for unreadable input or unwritable output.
PrepareIndexedResult prepare_indexed(const PrepareIndexedOptions& options);

}  // namespace kiln::data
