#include "kiln/data/indexed/indexed_dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/indexed/indexed_writer.h"
#include "kiln/data/indexed/prepare_indexed.h"
#include "kiln/data/text/bert_tokenizer.h"
#include "kiln/data/text/sentence_splitter.h"
#include "tests/data/data_test_util.h"
#include "tests/testing/error_of.h"
#include "tests/testing/run_command.h"

namespace {

namespace fs = std::filesystem;
using kiln::data::IndexDType;
using kiln::data::IndexedDataset;
using kiln::data::IndexedDatasetWriter;
using kiln::data::PrepareIndexedOptions;
using kiln::data::testing::fresh_temp_dir;
using kiln::data::testing::test_vocab;
using kiln::data::testing::write_text;
using kiln::testing::error_of;
using kiln::testing::run_command;

const fs::path kGolden = fs::path(KILN_SOURCE_DIR) / "tests" / "golden" / "indexed";

PrepareIndexedOptions golden_options(const fs::path& out_dir, bool split, int workers) {
  PrepareIndexedOptions o;
  o.input = kGolden / "corpus.jsonl";
  o.vocab = test_vocab();
  o.output_prefix = (out_dir / "corpus").string();
  o.split_sentences = split;
  o.workers = workers;
  o.progress = false;
  return o;
}

TEST(IndexedDataset, WriterRoundTripsDocumentsAndEmptyDocuments) {
  const fs::path dir = fresh_temp_dir("indexed-roundtrip");
  for (const IndexDType dtype : {IndexDType::u16, IndexDType::i32}) {
    const std::string prefix = (dir / (dtype == IndexDType::u16 ? "u16" : "i32")).string();
    {
      IndexedDatasetWriter w(prefix, dtype);
      w.add_sequence(std::vector<int32_t>{5, 6, 7});
      w.add_sequence(std::vector<int32_t>{65535});
      w.end_document();
      w.end_document();  // empty document
      w.add_sequence(std::vector<int32_t>{});
      w.add_sequence(std::vector<int32_t>{1, 2});
      w.end_document();
      w.finish();
    }
    const auto ds = IndexedDataset::open(prefix);
    EXPECT_EQ(ds->dtype(), dtype);
    ASSERT_EQ(ds->num_sequences(), 4);
    ASSERT_EQ(ds->num_documents(), 3);
    EXPECT_EQ(ds->document_index(1), 2);
    EXPECT_EQ(ds->document_index(2), 2);
    EXPECT_EQ(ds->document_index(3), 4);
    EXPECT_EQ(ds->sequence(0), (std::vector<int32_t>{5, 6, 7}));
    EXPECT_EQ(ds->sequence(1), (std::vector<int32_t>{65535}));
    EXPECT_TRUE(ds->sequence(2).empty());
    EXPECT_EQ(ds->sequence(3), (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(ds->sequence_pointer(3), 4 * int64_t(kiln::data::index_dtype_size(uint8_t(dtype))));
    EXPECT_EQ(fs::file_size(prefix + ".idx"), 34u + 12u * 4u + 8u * 4u);
  }
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos);
}

TEST(IndexedDataset, MatchesCommittedGoldenBytes) {
  const fs::path dir = fresh_temp_dir("indexed-golden");
  for (const bool split : {true, false}) {
    const auto r = kiln::data::prepare_indexed(golden_options(dir, split, 1));
    const std::string kind = split ? "sentence" : "document";
    ASSERT_EQ(r.prefixes.at(0), (dir / ("corpus_text_" + kind)).string());
    for (const char* ext : {".bin", ".idx"}) {
      EXPECT_EQ(kiln::read_file(r.prefixes[0] + ext), kiln::read_file(kGolden / ("expected_text_" + kind + ext)))
          << kind << ext;
    }
  }
}

// The committed golden bytes are what tools/golden/make_indexed_golden.py writes: its own BERT
// tokenizer and MMIDIDX writer (from the spec, not kiln), the sentences split by hand.
TEST(IndexedDataset, GoldenBytesComeFromTheIndependentPythonWriter) {
  KILN_REQUIRE_TEST_DATA();
  const fs::path dir = fresh_temp_dir("indexed-python-writer");
  const auto [rc, out] = run_command("/usr/bin/python3 " +
                                     (fs::path(KILN_SOURCE_DIR) / "tools/golden/make_indexed_golden.py").string() +
                                     " " + test_vocab().string() + " " + dir.string());
  ASSERT_EQ(rc, 0) << out;
  for (const char* kind : {"sentence", "document"})
    for (const char* ext : {".bin", ".idx"}) {
      const std::string name = std::string("expected_text_") + kind + ext;
      EXPECT_EQ(kiln::read_file(dir / name), kiln::read_file(kGolden / name)) << name;
    }
}

TEST(IndexedDataset, OutputIsByteIdenticalForAnyWorkerCount) {
  const fs::path dir = fresh_temp_dir("indexed-workers");
  kiln::data::testing::write_text(dir / "many.jsonl", [] {
    std::string s;
    const std::string text = kiln::data::testing::sotu_sentences(120000);
    for (size_t pos = 0, k = 0; pos < text.size(); pos += 700, ++k)
      s += nlohmann::json{{"text", text.substr(pos, 700)}, {"k", k}}.dump() + "\n";
    return s;
  }());
  std::string reference_bin, reference_idx;
  for (const int workers : {1, 2, 5}) {
    PrepareIndexedOptions o = golden_options(dir / std::to_string(workers), true, workers);
    o.input = dir / "many.jsonl";
    const auto r = kiln::data::prepare_indexed(o);
    EXPECT_GT(r.documents, 150);
    const std::string bin = kiln::read_file(r.prefixes[0] + ".bin"), idx = kiln::read_file(r.prefixes[0] + ".idx");
    if (workers == 1) {
      reference_bin = bin;
      reference_idx = idx;
    } else {
      EXPECT_EQ(bin, reference_bin) << workers << " workers";
      EXPECT_EQ(idx, reference_idx) << workers << " workers";
    }
  }
}

// tools/indexed_reader.py (numpy, written from the format spec) must read kiln's files and see
// the same documents as splitting + tokenizing the corpus directly.
TEST(IndexedDataset, IndependentPythonReaderAgrees) {
  const fs::path dir = fresh_temp_dir("indexed-python");
  const auto r = kiln::data::prepare_indexed(golden_options(dir, true, 3));
  const std::string cmd = "/usr/bin/python3 " + (fs::path(KILN_SOURCE_DIR) / "tools" / "indexed_reader.py").string() +
                          " " + r.prefixes[0] + " --json " + (dir / "dump.json").string();
  const auto [rc, out] = run_command(cmd);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("dtype code 8, 18 sequences, 6 documents"), std::string::npos) << out;
  const auto dump = nlohmann::json::parse(kiln::read_file(dir / "dump.json"));
  EXPECT_EQ(dump["dtype"], 8);

  const kiln::data::BertTokenizer tokenizer(kiln::data::Vocab::load(test_vocab()));
  std::ifstream corpus(kGolden / "corpus.jsonl");
  std::vector<std::vector<std::vector<int32_t>>> expected;
  for (std::string line; std::getline(corpus, line);) {
    const std::string text = nlohmann::json::parse(line)["text"];
    auto& doc = expected.emplace_back();
    for (const auto s : kiln::data::split_sentences(text))
      if (auto ids = tokenizer.encode(s); !ids.empty()) doc.push_back(ids);
  }
  EXPECT_EQ(dump["documents"].get<decltype(expected)>(), expected);

  const auto ds = IndexedDataset::open(r.prefixes[0]);
  for (int64_t d = 0; d < ds->num_documents(); ++d)
    for (int64_t s = ds->document_index(d); s < ds->document_index(d + 1); ++s)
      EXPECT_EQ(ds->sequence(s), expected[size_t(d)][size_t(s - ds->document_index(d))]);
}

TEST(IndexedDataset, PythonReaderRejectsATruncatedBin) {
  const fs::path dir = fresh_temp_dir("indexed-python-bad");
  const auto r = kiln::data::prepare_indexed(golden_options(dir, true, 1));
  fs::resize_file(r.prefixes[0] + ".bin", fs::file_size(r.prefixes[0] + ".bin") - 2);
  const auto [rc, out] =
      run_command("/usr/bin/python3 " + (fs::path(KILN_SOURCE_DIR) / "tools" / "indexed_reader.py").string() + " " + r.prefixes[0]);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("the index describes"), std::string::npos) << out;
}

TEST(IndexedDataset, OpenRejectsBadMagicVersionAndTruncation) {
  const fs::path dir = fresh_temp_dir("indexed-bad");
  const auto r = kiln::data::prepare_indexed(golden_options(dir, true, 1));
  const std::string prefix = r.prefixes[0], idx = kiln::read_file(prefix + ".idx");

  EXPECT_EQ(error_of([&] { IndexedDataset::open(dir / "nothing"); }),
            (dir / "nothing").string() + ".idx: not found (--data-path takes the prefix without .idx/.bin)");

  std::string bad = idx;
  bad[0] = 'X';
  write_text(prefix + ".idx", bad);
  EXPECT_EQ(error_of([&] { IndexedDataset::open(prefix); }), prefix + ".idx: not a Megatron indexed dataset (bad magic)");

  bad = idx;
  bad[9] = 2;
  write_text(prefix + ".idx", bad);
  EXPECT_EQ(error_of([&] { IndexedDataset::open(prefix); }), prefix + ".idx: unsupported version 2 (expected 1)");

  bad = idx;
  bad[17] = 6;
  write_text(prefix + ".idx", bad);
  EXPECT_EQ(error_of([&] { IndexedDataset::open(prefix); }),
            prefix + ".idx: dtype code 6 is floating point, not token ids");

  write_text(prefix + ".idx", idx.substr(0, idx.size() - 8));
  EXPECT_EQ(error_of([&] { IndexedDataset::open(prefix); }),
            prefix + ".idx: truncated (" + std::to_string(idx.size() - 8) + " bytes, the header needs " +
                std::to_string(idx.size()) + ")");

  write_text(prefix + ".idx", idx);
  fs::resize_file(prefix + ".bin", fs::file_size(prefix + ".bin") - 3);
  const std::string message = error_of([&] { IndexedDataset::open(prefix); });
  EXPECT_TRUE(message.starts_with(prefix + ".bin: truncated: sequence 17 ends at byte 260")) << message;
}

// A sequence pointer near INT64_MAX made `pointer + length * item size` overflow (UB) and wrap
// negative, so the sequence passed the bounds check and reads ran outside the .bin.
TEST(IndexedDataset, OpenRejectsAPointerThatOverflowsTheBounds) {
  const fs::path dir = fresh_temp_dir("indexed-overflow");
  std::string idx(kiln::data::kIndexMagic, sizeof kiln::data::kIndexMagic);
  const auto append = [&](auto v) { idx.append(reinterpret_cast<const char*>(&v), sizeof v); };
  append(uint64_t(1));                       // version
  append(uint8_t(IndexDType::u16));
  append(uint64_t(1));                       // sequences
  append(uint64_t(2));                       // document indices
  append(int32_t(1));                        // lengths
  append(int64_t(INT64_MAX - 1));            // pointers
  append(int64_t(0));                        // document indices
  append(int64_t(1));
  const std::string prefix = (dir / "overflow").string();
  write_text(prefix + ".idx", idx);
  write_text(prefix + ".bin", "abcd");
  EXPECT_EQ(error_of([&] { IndexedDataset::open(prefix); }),
            prefix + ".bin: truncated: sequence 0 ends at byte 9223372036854775808 but the file has 4 bytes");
}

TEST(PrepareIndexed, BadJsonLinesAreOneLineErrorsNamingTheLine) {
  const fs::path dir = fresh_temp_dir("indexed-json-errors");
  PrepareIndexedOptions o = golden_options(dir, true, 2);
  const std::string input = (dir / "in.jsonl").string();
  o.input = input;

  write_text(input, "{\"text\": \"fine.\"}\n\n{\"text\": \"also fine\"}\n{\"text\": oops}\n");
  EXPECT_EQ(error_of([&] { kiln::data::prepare_indexed(o); }), input + ": line 4: malformed JSON (byte 10)");

  write_text(input, "{\"text\": \"fine.\"}\n{\"body\": \"no text\"}\n");
  EXPECT_EQ(error_of([&] { kiln::data::prepare_indexed(o); }), input + ": line 2: missing key \"text\"");

  write_text(input, "{\"text\": 17}\n");
  EXPECT_EQ(error_of([&] { kiln::data::prepare_indexed(o); }), input + ": line 1: key \"text\" is not a string");

  write_text(input, "[1, 2]\n");
  EXPECT_EQ(error_of([&] { kiln::data::prepare_indexed(o); }), input + ": line 1: expected a JSON object");

  o.input = dir / "absent.jsonl";
  EXPECT_EQ(error_of([&] { kiln::data::prepare_indexed(o); }), "input file " + (dir / "absent.jsonl").string() + ": not found");
  // Nothing half-written is left behind.
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().extension(), ".jsonl") << e.path();
}

TEST(PrepareIndexed, CommandLineWritesFilesAndReportsErrorsOnOneLine) {
  const fs::path dir = fresh_temp_dir("indexed-cli");
  const std::string vocab = test_vocab().string();
  auto [rc, out] = run_command(std::string(KILN_BINARY) + " prepare indexed --input " + (kGolden / "corpus.jsonl").string() +
                               " --vocab " + vocab + " --output-prefix " + (dir / "c").string() + " --split-sentences --workers 2");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("MB/s"), std::string::npos) << out;
  EXPECT_EQ(kiln::read_file(dir / "c_text_sentence.bin"), kiln::read_file(kGolden / "expected_text_sentence.bin"));
  EXPECT_EQ(kiln::read_file(dir / "c_text_sentence.idx"), kiln::read_file(kGolden / "expected_text_sentence.idx"));

  write_text(dir / "bad.jsonl", "{\"text\": \"a\"}\n{\"title\": \"b\"}\n");
  std::tie(rc, out) = run_command(std::string(KILN_BINARY) + " prepare indexed --quiet --input " + (dir / "bad.jsonl").string() +
                                  " --vocab " + vocab + " --output-prefix " + (dir / "bad").string());
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "kiln: error: " + (dir / "bad.jsonl").string() + ": line 2: missing key \"text\"\n");
}

}  // namespace
