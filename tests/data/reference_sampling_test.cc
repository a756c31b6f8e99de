// `prepare bert --sampling reference` against tools/golden/reference_pretraining_data.py, the
// Python restatement of the MLPerf reference's create_pretraining_data.py with CPython's own
// random.Random: every train and eval sample must be identical, for several seeds and settings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "kiln/core/file_util.h"
#include "kiln/data/bert/prepare_bert.h"
#include "kiln/data/bert/sample_set.h"
#include "kiln/data/bert/text_documents.h"
#include "tests/testing/run_command.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPython = "/usr/bin/python3";

// Short documents from the State of the Union text, then lines that exercise the reference's
// reading: Python-whitespace-only lines (new documents), one-line documents (always a random
// next), a line longer than any sequence (truncation) and no final newline.
std::string reference_text(size_t bytes, int sentences_per_document) {
  std::string text = testing::sotu_sentences(bytes, sentences_per_document);
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "the congress shall make no law respecting an establishment . ";
  text += "\n\xC2\xA0\nA document of one line .\n\n\n\x1C\nAnother document begins here .\n" + long_line +
          "\nIt ends with a line separator .\xE2\x80\xA8\n \t \nThe last document has no final newline .";
  return text;
}

// For each '\n'-separated line of `path`, the ids kiln's tokenizer gives it.
void write_line_ids(const fs::path& path, const BertTokenizer& tokenizer, const fs::path& out) {
  const std::string text = read_file(path);
  nlohmann::json lines = nlohmann::json::array();
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::vector<int32_t> ids;
    tokenizer.encode_append(python_strip(std::string_view(text).substr(pos, end - pos)), ids);
    lines.push_back(ids);
    pos = end + 1;
  }
  testing::write_text(out, lines.dump());
}

struct Coverage {
  int random_next = 0, actual_next = 0, short_samples = 0, random_words = 0;
};

// Compares every sample of `kbs` with the script's output for `text`; counts what it covered.
void expect_reference(const fs::path& kbs, const fs::path& text, const PrepareBertOptions& o, int64_t eval_samples,
                      const Vocab& vocab, Coverage& seen) {
  const fs::path out = kbs.string() + ".ref.json";
  const std::string cmd = std::string(kPython) + " " + KILN_SOURCE_DIR + "/tools/golden/reference_pretraining_data.py " +
                          text.string() + " " + text.string() + ".ids.json " + o.vocab.string() + " " + out.string() +
                          " --seed " + std::to_string(o.seed) + " --max-seq-length " +
                          std::to_string(o.instance.max_seq_length) + " --max-predictions " +
                          std::to_string(o.instance.max_predictions) + " --masked-lm-prob " +
                          std::to_string(o.instance.masked_lm_prob) + " --short-seq-prob " +
                          std::to_string(o.instance.short_seq_prob) + " --dupe-factor " +
                          std::to_string(o.instance.dupe_factor) + " --eval-samples " + std::to_string(eval_samples);
  const auto [rc, log] = kiln::testing::run_command(cmd);
  ASSERT_EQ(rc, 0) << cmd << "\n" << log;
  const auto ref = nlohmann::json::parse(read_file(out));
  const BertSampleSet set = BertSampleSet::open(kbs);
  ASSERT_EQ(set.size(), int64_t(ref.size())) << kbs;
  const int S = set.seq_len(), P = set.max_pred();
  BertBatch b;
  b.resize(1, S, P);
  for (size_t i = 0; i < ref.size(); ++i) {
    set.read(int64_t(i), b, 0);
    const auto& r = ref[i];
    auto ids = r["input_ids"].get<std::vector<int32_t>>(), segments = r["segment_ids"].get<std::vector<int32_t>>();
    auto positions = r["masked_lm_positions"].get<std::vector<int32_t>>();
    auto labels = r["masked_lm_ids"].get<std::vector<int32_t>>();
    const size_t length = ids.size(), predictions = positions.size();
    ids.resize(size_t(S)), segments.resize(size_t(S)), positions.resize(size_t(P)), labels.resize(size_t(P));
    ASSERT_EQ(b.input_ids, ids) << kbs << " sample " << i;
    ASSERT_EQ(b.segment_ids, segments) << kbs << " sample " << i;
    ASSERT_EQ(b.masked_positions, positions) << kbs << " sample " << i;
    ASSERT_EQ(b.masked_ids, labels) << kbs << " sample " << i;
    ASSERT_EQ(b.nsp_labels[0], r["next_sentence_label"].get<int>()) << kbs << " sample " << i;
    (b.nsp_labels[0] ? seen.random_next : seen.actual_next) += 1;
    seen.short_samples += int(length) < S / 2;
    for (size_t k = 0; k < predictions; ++k) {
      const int32_t now = b.input_ids[size_t(positions[k])];
      seen.random_words += now != vocab.mask_id() && now != labels[k];
    }
  }
}

struct Setting {
  uint64_t seed;
  int seq, predictions, dupe;
  double masked_lm_prob, short_seq_prob;
  int64_t eval_samples;
};

TEST(ReferenceSampling, EverySampleMatchesThePythonRestatementOfTheReference) {
  KILN_REQUIRE_TEST_DATA();
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " not installed";
  const fs::path dir = testing::fresh_temp_dir("reference-sampling");
  const std::string text = reference_text(30000, 5);
  const size_t cut = text.find("\n\n", text.size() / 3);
  testing::write_text(dir / "a.txt", text.substr(0, cut));
  testing::write_text(dir / "b.txt", text.substr(cut));
  testing::write_text(dir / "eval.txt", reference_text(8000, 2));
  const BertTokenizer tokenizer(Vocab::load(testing::test_vocab()));
  for (const char* name : {"a.txt", "b.txt", "eval.txt"})
    write_line_ids(dir / name, tokenizer, dir / (std::string(name) + ".ids.json"));

  Coverage seen;
  // The last setting wants more eval samples than are generated: the reference repeats some.
  for (const Setting& s : {Setting{12345, 64, 10, 3, 0.15, 0.1, 50}, Setting{0, 32, 5, 2, 0.15, 0.5, 20},
                           Setting{(uint64_t(1) << 33) + 7, 128, 20, 2, 0.2, 0.1, 120}}) {
    SCOPED_TRACE("seed " + std::to_string(s.seed));
    PrepareBertOptions o;
    o.inputs = {dir / "a.txt", dir / "b.txt"};
    o.eval_input = dir / "eval.txt";
    o.vocab = testing::test_vocab();
    o.output = dir / ("out-" + std::to_string(s.seed));
    o.seed = s.seed;
    o.instance = {s.seq, s.predictions, s.masked_lm_prob, s.short_seq_prob, s.dupe, false};
    o.eval_samples = s.eval_samples;
    o.workers = 2;
    o.progress = false;
    const PrepareBertResult r = prepare_bert(o);
    ASSERT_EQ(r.train_parts, 2);  // one part, one random stream, per input file
    expect_reference(o.output / "train" / "part-00000.kbs", dir / "a.txt", o, 0, tokenizer.vocab(), seen);
    expect_reference(o.output / "train" / "part-00001.kbs", dir / "b.txt", o, 0, tokenizer.vocab(), seen);
    expect_reference(o.output / "eval.kbs", dir / "eval.txt", o, s.eval_samples, tokenizer.vocab(), seen);
  }
  EXPECT_GT(seen.random_next, 0);
  EXPECT_GT(seen.actual_next, 0);
  EXPECT_GT(seen.short_samples, 0);
  EXPECT_GT(seen.random_words, 0);
  fs::remove_all(dir);
}

TEST(ReferenceSampling, LinesAreStrippedAsPythonStripsThem) {
  EXPECT_EQ(python_strip(" \t\x1C\xC2\xA0" "a b\xE2\x80\xA8\xE3\x80\x80\r"), "a b");
  EXPECT_EQ(python_strip("\xE2\x80\x8A\xE2\x80\xAF\xE2\x81\x9F\xE1\x9A\x80\xC2\x85"), "");
  // U+200B (zero width space) and U+00A9 are not whitespace to Python.
  EXPECT_EQ(python_strip("\xE2\x80\x8B" "x\xC2\xA9"), "\xE2\x80\x8B" "x\xC2\xA9");
  EXPECT_EQ(scan_documents("a\n\xC2\xA0\nb\n", 0).size(), 2u);
}

}  // namespace
}  // namespace kiln::data
