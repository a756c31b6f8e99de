#include "kiln/data/indexed/prepare_indexed.h"

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kiln/core/error.h"
#include "kiln/data/indexed/indexed_writer.h"
#include "kiln/data/text/bert_tokenizer.h"
#include "kiln/data/text/sentence_splitter.h"

namespace kiln::data {

namespace {

constexpr size_t kLinesPerChunk = 256;

// One input line encoded: per key, its sentences' ids.
using EncodedLine = std::vector<std::vector<std::vector<int32_t>>>;

EncodedLine encode_line(const std::string& line, int64_t line_no, const PrepareIndexedOptions& o,
                        const BertTokenizer& tokenizer) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("{}: line {}: malformed JSON (byte {})", o.input.string(), line_no, e.byte);
  }
  KILN_CHECK(doc.is_object(), "{}: line {}: expected a JSON object", o.input.string(), line_no);
  EncodedLine out(o.json_keys.size());
  for (size_t k = 0; k < o.json_keys.size(); ++k) {
    const auto it = doc.find(o.json_keys[k]);
    KILN_CHECK(it != doc.end(), "{}: line {}: missing key \"{}\"", o.input.string(), line_no, o.json_keys[k]);
    KILN_CHECK(it->is_string(), "{}: line {}: key \"{}\" is not a string", o.input.string(), line_no,
               o.json_keys[k]);
    const std::string& text = it->get_ref<const std::string&>();
    const std::vector<std::string_view> pieces =
        o.split_sentences ? split_sentences(text) : std::vector<std::string_view>{text};
    for (const std::string_view s : pieces) {
      std::vector<int32_t> ids;
      tokenizer.encode_append(s, ids);
      if (!ids.empty()) out[k].push_back(std::move(ids));
    }
  }
  return out;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

std::string indexed_output_prefix(const std::string& prefix, const std::string& key, bool split_sentences) {
  return prefix + "_" + key + (split_sentences ? "_sentence" : "_document");
}

PrepareIndexedResult prepare_indexed(const PrepareIndexedOptions& o) {
  KILN_CHECK(!o.json_keys.empty(), "--json-keys: at least one key is required");
  KILN_CHECK(o.workers >= 1, "--workers must be at least 1, got {}", o.workers);
  KILN_CHECK(std::filesystem::is_regular_file(o.input), "input file {}: not found", o.input.string());
  std::ifstream in(o.input, std::ios::binary);
  KILN_CHECK(in.good(), "input file {}: cannot open", o.input.string());
  const BertTokenizer tokenizer(Vocab::load(o.vocab), o.lower_case);
  const IndexDType dtype = index_dtype_for_vocab(tokenizer.vocab().size());

  const std::filesystem::path parent = std::filesystem::path(o.output_prefix).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  PrepareIndexedResult result;
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string& key : o.json_keys) {
    result.prefixes.push_back(indexed_output_prefix(o.output_prefix, key, o.split_sentences));
    writers.push_back(std::make_unique<IndexedDatasetWriter>(result.prefixes.back(), dtype));
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  int64_t line_no = 0, bytes = 0;
  auto report = [&](bool final) {
    const auto now = std::chrono::steady_clock::now();
    if (!o.progress || (!final && now - last_report < std::chrono::seconds(2))) return;
    last_report = now;
    const double secs = std::max(1e-9, std::chrono::duration<double>(now - t0).count());
    std::fprintf(stderr, "prepare indexed: %lld documents, %.1f MB in %.1f s (%.2f MB/s)%s\n",
                 static_cast<long long>(writers[0]->num_documents()), double(bytes) / 1e6, secs,
                 double(bytes) / 1e6 / secs, final ? ", done" : "");
  };

  const size_t batch_lines = kLinesPerChunk * size_t(o.workers);
  std::vector<std::string> lines;
  std::vector<int64_t> numbers;
  std::vector<EncodedLine> encoded;
  std::vector<std::exception_ptr> errors;
  for (bool eof = false; !eof;) {
    lines.clear();
    numbers.clear();
    std::string line;
    while (lines.size() < batch_lines) {
      if (!std::getline(in, line)) {
        eof = true;
        break;
      }
      ++line_no;
      bytes += int64_t(line.size()) + 1;
      if (is_blank(line)) continue;
      lines.push_back(std::move(line));
      numbers.push_back(line_no);
    }
    encoded.assign(lines.size(), {});
    errors.assign(lines.size(), nullptr);
#pragma omp parallel for num_threads(o.workers) schedule(dynamic, 16)
    for (int64_t i = 0; i < int64_t(lines.size()); ++i) {
      try {
        encoded[size_t(i)] = encode_line(lines[size_t(i)], numbers[size_t(i)], o, tokenizer);
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      for (size_t k = 0; k < writers.size(); ++k) {
        for (const auto& sentence : encoded[i][k]) writers[k]->add_sequence(sentence);
        writers[k]->end_document();
      }
    }
    report(false);
  }
  KILN_CHECK(!in.bad(), "input file {}: read error", o.input.string());
  for (auto& w : writers) {
    w->finish();
    result.documents += w->num_documents();
    result.sequences += w->num_sequences();
    result.tokens += w->num_tokens();
  }
  report(true);
  return result;
}

}  // namespace kiln::data
