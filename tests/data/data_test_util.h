// tests/data/data_test_util.h — temp directories and small pretraining texts for data tests,
// taken from what scripts/fetch_data.sh fetches into data/ (tests/testing/test_data.h).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/core/error.h"
#include "tests/testing/test_data.h"

namespace kiln::data::testing {

// The bert-base-uncased vocab fetched into data/.
inline std::filesystem::path test_vocab() { return ::kiln::testing::test_vocab(); }

// A fresh, empty directory under the system temp dir, unique to this process and `name`.
inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kiln-data-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::ifstream open_test_text() {
  std::ifstream in(::kiln::testing::test_text());
  if (!in) throw Error("{}: cannot open (run scripts/fetch_data.sh)", ::kiln::testing::test_text().string());
  return in;
}

// The State of the Union text as pretraining text (one sentence per line, a blank line between
// addresses): whole lines from the start until the result holds `max_bytes`. With
// `sentences_per_address` > 0 only the first that many sentences of each address are kept, for
// many short documents in a few bytes.
inline std::string sotu_sentences(size_t max_bytes, int sentences_per_address = 0) {
  std::ifstream in = open_test_text();
  std::string out, line;
  int sentence = 0;
  while (out.size() < max_bytes && std::getline(in, line)) {
    if (line.empty()) {
      sentence = 0;
      out += "\n";
    } else if (sentences_per_address <= 0 || sentence++ < sentences_per_address) {
      out += line + "\n";
    }
  }
  return out;
}

// The State of the Union text as Megatron JSON lines, one address per line (its sentences joined
// by spaces): the addresses that start after the first `skip_bytes`, until `max_bytes` more have
// been read (the last one cut there).
inline void write_sotu_jsonl(const std::filesystem::path& out, size_t max_bytes, size_t skip_bytes = 0) {
  std::ifstream in = open_test_text();
  std::ofstream jsonl(out);
  std::string line, doc;
  size_t read = 0;
  if (skip_bytes > 0) {
    while (read < skip_bytes && std::getline(in, line)) read += line.size() + 1;
    while (std::getline(in, line) && !line.empty()) {}  // to the end of the address cut there
  }
  read = 0;
  auto flush = [&] {
    if (!doc.empty()) jsonl << nlohmann::json{{"text", doc}}.dump() << "\n";
    doc.clear();
  };
  while (read < max_bytes && std::getline(in, line)) {
    read += line.size() + 1;
    if (line.empty()) flush();
    else doc += (doc.empty() ? "" : " ") + line;
  }
  flush();
}

}  // namespace kiln::data::testing
