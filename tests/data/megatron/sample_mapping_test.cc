#include "kiln/data/megatron/sample_mapping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/indexed/indexed_writer.h"
#include "tests/data/data_test_util.h"
#include "tests/testing/error_of.h"
#include "tests/testing/run_command.h"

namespace {

using namespace kiln::data::megatron;
using kiln::data::IndexedDataset;
using kiln::testing::error_of;

// Documents given as lists of sentence lengths (token ids are irrelevant here).
std::shared_ptr<const IndexedDataset> make_dataset(const std::string& name,
                                                   const std::vector<std::vector<int>>& documents) {
  const std::string prefix = (kiln::data::testing::fresh_temp_dir(name) / "d").string();
  kiln::data::IndexedDatasetWriter w(prefix, kiln::data::IndexDType::u16);
  for (const auto& doc : documents) {
    for (const int len : doc) w.add_sequence(std::vector<int32_t>(size_t(len), 1000));
    w.end_document();
  }
  w.finish();
  return IndexedDataset::open(prefix);
}

TEST(MegatronSplit, ParsesAndNormalisesThreeNumbers) {
  const auto s = parse_split("949,50,1");
  EXPECT_DOUBLE_EQ(s[0], 0.949);
  EXPECT_DOUBLE_EQ(s[1], 0.05);
  EXPECT_DOUBLE_EQ(s[2], 0.001);
  EXPECT_DOUBLE_EQ(parse_split("2,1,1")[0], 0.5);
  for (const char* bad : {"99,1", "1,2,3,4", "a,b,c", "1,,2", "-1,2,3", ""})
    EXPECT_EQ(error_of([&] { parse_split(bad); }),
              std::string("--split \"") + bad + "\": expected three non-negative numbers like 949,50,1");
  EXPECT_EQ(error_of([] { parse_split("0,0,0"); }), "--split \"0,0,0\": the three numbers must not all be zero");
}

TEST(MegatronSplit, DocumentRangesUseCumulativeBookendsAndHalfEvenRounding) {
  const auto s = parse_split("949,50,1");
  EXPECT_EQ(split_documents(s, 0, 1000), std::make_optional(std::pair<int64_t, int64_t>{0, 949}));
  EXPECT_EQ(split_documents(s, 1, 1000), std::make_optional(std::pair<int64_t, int64_t>{949, 999}));
  EXPECT_EQ(split_documents(s, 2, 1000), std::make_optional(std::pair<int64_t, int64_t>{999, 1000}));
  // 0.5 * 3 = 1.5 rounds to 2; 0.25 * 2 = 0.5 rounds to 0.
  EXPECT_EQ(split_documents(parse_split("1,1,0"), 0, 3), std::make_optional(std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(split_documents(parse_split("1,3,0"), 0, 2), std::make_optional(std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(split_documents(parse_split("100,0,0"), 1, 10), std::nullopt);
}

TEST(MegatronMapping, CoversEachDocumentInWholeEpochsAndSkipsUnusableDocuments) {
  std::vector<std::vector<int>> docs;
  for (int d = 0; d < 40; ++d) docs.push_back(std::vector<int>(size_t(2 + d % 7), 10 + d % 13));
  docs.push_back({100});           // one sentence: skipped with the binary head
  docs.push_back({20, 600, 20});   // a sentence over 512 tokens: skipped
  const auto data = make_dataset("mapping", docs);
  MappingOptions o;
  o.max_len = 61;
  o.num_samples = 300;
  const auto samples = build_sample_mapping(*data, 0, data->num_documents(), o, "test");
  ASSERT_GE(samples.size(), 300u);

  // Every (doc, sentence) of the usable documents is covered exactly once per epoch.
  std::map<int64_t, int> coverage;
  for (const auto& t : samples) {
    ASSERT_LT(t.first + 1, t.last);  // at least two sentences
    ASSERT_GE(t.target, 2);
    ASSERT_LE(t.target, 61);
    for (int64_t s = t.first; s < t.last; ++s) ++coverage[s];
  }
  const int64_t usable_sentences = data->document_index(40);
  ASSERT_EQ(int64_t(coverage.size()), usable_sentences);
  const int epochs = coverage.begin()->second;
  EXPECT_GT(epochs, 1);
  for (const auto& [s, n] : coverage) EXPECT_EQ(n, epochs) << "sentence " << s;

  const auto again = build_sample_mapping(*data, 0, data->num_documents(), o, "test");
  for (size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(samples[i].first, again[i].first);
  o.seed = 99;
  const auto other = build_sample_mapping(*data, 0, data->num_documents(), o, "test");
  EXPECT_NE(std::vector<int64_t>({samples[0].first, samples[1].first, samples[2].first}),
            std::vector<int64_t>({other[0].first, other[1].first, other[2].first}));
}

TEST(MegatronMapping, ShortTargetsAppearWithProbabilityShortSeqProb) {
  std::vector<std::vector<int>> docs(200, std::vector<int>(40, 3));
  const auto data = make_dataset("mapping-short", docs);
  MappingOptions o;
  o.max_len = 509;
  o.num_samples = 1;
  int64_t short_targets = 0, total = 0;
  const auto samples = build_sample_mapping(*data, 0, 200, o, "test");
  for (const auto& t : samples) {
    short_targets += t.target < 509;
    ++total;
  }
  ASSERT_GT(total, 200);
  // P(short) = 0.1 * (1 - 1/508); few samples, so a loose band around it.
  EXPECT_NEAR(double(short_targets) / double(total), 0.1, 0.05);
}

TEST(MegatronMapping, EmptyEpochIsAnErrorNotAHang) {
  const auto data = make_dataset("mapping-empty", {{30}, {40}, {50}});
  MappingOptions o;
  o.num_samples = 10;
  EXPECT_EQ(error_of([&] { build_sample_mapping(*data, 0, 3, o, "wiki_text_document (train split)"); }),
            "wiki_text_document (train split): no samples: every document has fewer than 2 sentences or a sentence "
            "over 512 tokens (prepare with --split-sentences, or train with --bert-no-binary-head)");
  o.min_sentences = 1;
  EXPECT_EQ(build_sample_mapping(*data, 0, 3, o, "x").size(), 12u);  // 4 epochs of 3
}

// Documents of varied shapes: empty, single-sentence, long, and one with a sentence over 512 tokens.
std::vector<std::vector<int>> varied_documents() {
  std::vector<std::vector<int>> docs;
  for (int d = 0; d < 60; ++d) {
    std::vector<int> doc;
    for (int s = 0; s < (d * 7) % 10; ++s) doc.push_back(1 + (d * 31 + s * 17) % 120);
    docs.push_back(doc);
  }
  docs[13] = {30, 513, 30};
  docs[40] = {600};  // alone in its document: kept without the binary head
  return docs;
}

// tests/data/megatron/megatron_mapping_ref.py ports helpers.cpp build_mapping from the spec with
// its own Mersenne Twisters, given only the documents' sentence lengths; kiln must agree exactly.
TEST(MegatronMapping, MatchesAnIndependentPythonPort) {
  const auto docs = varied_documents();
  const auto data = make_dataset("mapping-python", docs);
  const auto dir = kiln::data::testing::fresh_temp_dir("mapping-python-ref");
  const std::string script = std::string(KILN_SOURCE_DIR) + "/tests/data/megatron/megatron_mapping_ref.py";
  struct Case {
    int64_t begin, end;
    MappingOptions o;
  };
  std::vector<Case> cases(4);
  cases[0] = {0, 60, {.max_len = 125, .num_samples = 500}};  // binary head, seed 1234, P(short) 0.1
  cases[1] = {5, 47, {.max_len = 61, .short_seq_prob = 0.3, .seed = 7, .min_sentences = 1, .num_samples = 300}};
  cases[2] = {20, 60, {.max_len = 509, .short_seq_prob = 0.0, .seed = 99, .num_samples = 50}};
  cases[3] = {0, 60, {.max_len = 13, .short_seq_prob = 0.5, .seed = 4000000000u, .num_samples = 2000}};
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [begin, end, o] = cases[c];
    SCOPED_TRACE(::testing::Message() << "case " << c);
    const nlohmann::json req{{"documents", docs},         {"doc_begin", begin},  {"doc_end", end},
                             {"max_len", o.max_len},      {"seed", o.seed},      {"short_seq_prob", o.short_seq_prob},
                             {"min_sentences", o.min_sentences}, {"num_samples", o.num_samples}};
    kiln::data::testing::write_text(dir / "req.json", req.dump());
    const auto [rc, out] = kiln::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "req.json").string() +
                                                      " " + (dir / "out.json").string());
    ASSERT_EQ(rc, 0) << out;
    const auto want = nlohmann::json::parse(kiln::read_file(dir / "out.json"));
    const auto got = build_sample_mapping(*data, begin, end, o, "test");
    ASSERT_EQ(got.size(), want.size());
    ASSERT_GE(int64_t(got.size()), o.num_samples);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::vector<int64_t>({got[i].first, got[i].last, got[i].target}), want[i].get<std::vector<int64_t>>())
          << "sample " << i;
  }
}

TEST(MegatronMapping, PythonPortsMersenneTwistersGiveTheStandardsValues) {
  const auto [rc, out] = kiln::testing::run_command("/usr/bin/python3 " + std::string(KILN_SOURCE_DIR) +
                                                    "/tests/data/megatron/megatron_mapping_ref.py --self-test");
  EXPECT_EQ(rc, 0) << out;
}

TEST(MegatronBlend, GreedyIndexFollowsWeightsWithTiesToTheLowestIndex) {
  const auto index = build_blending_index({0.3, 0.7}, 1000);
  ASSERT_EQ(index.size(), 1000u);
  std::vector<int64_t> counts(2, 0);
  for (const auto& [d, s] : index) EXPECT_EQ(s, counts[size_t(d)]++);
  EXPECT_NEAR(double(counts[0]), 300.0, 1.0);
  EXPECT_EQ(index[0].first, 1);  // 0.7 > 0.3
  EXPECT_EQ(index[1].first, 0);  // 0.3 > 0.7 - 1
  const auto even = build_blending_index({0.5, 0.5}, 4);
  EXPECT_EQ(even[0].first, 0);  // tie
  EXPECT_EQ(even[1].first, 1);
}

}  // namespace
