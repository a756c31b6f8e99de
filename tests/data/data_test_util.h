// tests/data/data_test_util.h — temp directories and small pretraining texts for data tests.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::data::testing {

inline std::filesystem::path shared_vocab() {
  return std::filesystem::path(KILN_SHARED_DATA_DIR) / "bert-base-uncased-vocab.txt";
}

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

// The first `max_bytes` of wikitext-2 valid as pretraining text: a heading starts a new
// document and each paragraph is split into one sentence per line at " . ".
inline std::string wikitext_sentences(size_t max_bytes) {
  std::ifstream in(std::filesystem::path(KILN_SHARED_DATA_DIR) / "wikitext-2" / "valid.txt");
  std::ostringstream out;
  std::string line;
  size_t read = 0;
  while (read < max_bytes && std::getline(in, line)) {
    read += line.size() + 1;
    if (line.find_first_not_of(' ') == std::string::npos) continue;
    if (line.starts_with(" = ")) {
      out << "\n";
      continue;
    }
    size_t pos = 0;
    while (pos < line.size()) {
      size_t end = line.find(" . ", pos);
      end = end == std::string::npos ? line.size() : end + 2;
      out << line.substr(pos, end - pos) << "\n";
      pos = end + 1;
    }
  }
  return out.str();
}

}  // namespace kiln::data::testing
