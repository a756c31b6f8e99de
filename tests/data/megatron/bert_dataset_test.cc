#include "kiln/data/megatron/bert_dataset.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/megatron/masking.h"
#include "tests/data/megatron/megatron_test_util.h"
#include "tests/testing/error_of.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln::data::megatron;
using kiln::data::BertBatch;
using kiln::data::testing::test_vocab_loaded;
using kiln::data::testing::sotu_indexed_prefix;
using kiln::testing::error_of;

MegatronDataConfig sotu_config(int64_t train_samples) {
  MegatronDataConfig c;
  c.data = parse_data_path({sotu_indexed_prefix()});
  c.seq_length = 128;
  c.vocab = &test_vocab_loaded();
  c.seed = 1234;
  c.train_samples = train_samples;
  c.valid_samples = 50;
  return c;
}

// Samples [begin, end) of `ds` as one batch.
BertBatch batch_of(const MegatronBertDataset& ds, int64_t begin, int64_t end, int seq_length, int max_pred) {
  BertBatch b;
  b.resize(int(end - begin), seq_length, max_pred);
  for (int64_t i = begin; i < end; ++i) ds.get(i, b, int(i - begin));
  return b;
}

const MegatronBertDatasets& sotu_datasets() {
  static const MegatronBertDatasets ds = build_megatron_bert_datasets(sotu_config(3000));
  return ds;
}

TEST(MegatronDataPath, ParsesPlainAndWeightedForms) {
  auto b = parse_data_path({"A"});
  EXPECT_EQ(b.prefixes, std::vector<std::string>{"A"});
  EXPECT_TRUE(b.weights.empty());
  b = parse_data_path({"A", "B"});
  EXPECT_EQ(b.prefixes.size(), 2u);
  EXPECT_TRUE(b.weights.empty());
  b = parse_data_path({"0.3", "A", "0.7", "B"});
  EXPECT_EQ(b.prefixes, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(b.weights, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(error_of([] { parse_data_path({"0.3", "A", "0.7"}); }),
            "--data-path: 3 words; the weighted form needs pairs \"weight prefix ...\"");
  EXPECT_EQ(error_of([] { parse_data_path({"0", "A", "0", "B"}); }), "--data-path: weights must sum to a positive number");
  EXPECT_EQ(error_of([] { parse_data_path({"0.3", "A", "x", "B"}); }),
            "--data-path: weight \"x\" is not a non-negative number");
  EXPECT_EQ(error_of([] { parse_data_path({}); }), "--data-path: no dataset prefix given");
}

TEST(MegatronBertDataset, BuildsSplitsWithTheRequestedSizes) {
  const auto& ds = sotu_datasets();
  ASSERT_TRUE(ds.train && ds.valid);
  EXPECT_EQ(ds.test, nullptr);  // no test samples requested
  EXPECT_GE(ds.train->size(), 3000);
  EXPECT_GE(ds.valid->size(), 50);
  EXPECT_EQ(sotu_config(1).max_predictions(), 18);  // floor(0.15 * 125)
  EXPECT_EQ(max_masked_predictions(0.15, 512), 76);
}

TEST(MegatronBertDataset, SamplesHaveBertLayoutAndSopLabelsNearHalf) {
  const auto& ds = *sotu_datasets().train;
  const int P = sotu_config(1).max_predictions();
  const BertBatch b = batch_of(ds, 0, 3000, 128, P);
  const auto& v = test_vocab_loaded();
  int64_t swapped = 0;
  for (int r = 0; r < b.batch; ++r) {
    const int32_t* ids = &b.input_ids[size_t(r) * 128];
    const int32_t* seg = &b.segment_ids[size_t(r) * 128];
    ASSERT_EQ(ids[0], v.cls_id());
    int len = 128;
    while (len > 0 && ids[len - 1] == v.pad_id()) --len;
    // Megatron's padding mask is "token != [PAD]" (a random replacement may be [PAD]).
    for (int i = 0; i < 128; ++i) ASSERT_EQ(b.input_mask[size_t(r) * 128 + size_t(i)], ids[i] != v.pad_id() ? 1 : 0);
    // Two [SEP]s: one closing A (segment 0), one closing B (segment 1) at the end.
    ASSERT_EQ(ids[len - 1], v.sep_id()) << r;
    ASSERT_EQ(seg[len - 1], 1);
    int seps = 0;
    for (int i = 0; i < len; ++i) seps += ids[i] == v.sep_id() && seg[i] == 0 && (i + 1 < len && seg[i + 1] == 1);
    ASSERT_EQ(seps, 1) << r;
    for (int i = len; i < 128; ++i) ASSERT_EQ(ids[i], v.pad_id());
    ASSERT_TRUE(b.nsp_labels[size_t(r)] == 0 || b.nsp_labels[size_t(r)] == 1);
    swapped += b.nsp_labels[size_t(r)];
  }
  EXPECT_NEAR(double(swapped) / 3000.0, 0.5, 0.03);  // 3.3 sigma
}

TEST(MegatronBertDataset, MaskingMatchesTheSpecStatistics) {
  const auto& ds = *sotu_datasets().train;
  const int P = sotu_config(1).max_predictions();
  const BertBatch b = batch_of(ds, 0, 3000, 128, P);
  const auto& v = test_vocab_loaded();
  int64_t masked = 0, tokens = 0, as_mask = 0, kept = 0, randomised = 0;
  double cap_sum = 0;
  for (int r = 0; r < b.batch; ++r) {
    const size_t s0 = size_t(r) * 128, p0 = size_t(r) * size_t(P);
    std::vector<int32_t> original(b.input_ids.begin() + long(s0), b.input_ids.begin() + long(s0 + 128));
    std::vector<uint8_t> is_masked(128, 0);
    int n = 0, prev = -1;
    for (int k = 0; k < P && b.masked_weights[p0 + size_t(k)] > 0; ++k, ++n) {
      const int pos = b.masked_positions[p0 + size_t(k)];
      ASSERT_GT(pos, prev);  // ascending, unique
      prev = pos;
      const int32_t label = b.masked_ids[p0 + size_t(k)], now = original[size_t(pos)];
      ASSERT_NE(label, v.cls_id());
      ASSERT_NE(label, v.sep_id());
      as_mask += now == v.mask_id();
      kept += now == label;
      randomised += now != v.mask_id() && now != label;
      original[size_t(pos)] = label;
      is_masked[size_t(pos)] = 1;
    }
    for (int k = n; k < P; ++k) ASSERT_EQ(b.masked_weights[p0 + size_t(k)], 0.0f);
    int len = 128;
    while (len > 0 && original[size_t(len) - 1] == v.pad_id()) --len;
    const double cap = masked_lm_cap(0.15, ds.part(0).triple(r).target, size_t(len));
    ASSERT_LE(double(n), cap);
    cap_sum += std::floor(cap);
    masked += n;
    tokens += len;
    // Whole words: a "##" piece is masked exactly when the piece before it (skipping [SEP]) is.
    int last = -1;
    for (int i = 1; i < len; ++i) {
      if (original[size_t(i)] == v.sep_id()) continue;
      if (last >= 0 && v.is_continuation(original[size_t(i)])) {
        ASSERT_EQ(is_masked[size_t(i)], is_masked[size_t(last)]) << "row " << r << " position " << i;
      }
      last = i;
    }
  }
  const double total = double(masked);
  // Whole words fill the cap floor(min(0.15 * target, round(0.15 * len))) almost always; the
  // floor and short targets keep the fraction of tokens a little under 15%.
  EXPECT_NEAR(total / cap_sum, 1.0, 0.01);
  EXPECT_GT(total / double(tokens), 0.135);
  EXPECT_LE(total / double(tokens), 0.15);
  EXPECT_NEAR(double(as_mask) / total, 0.8, 0.008);
  EXPECT_NEAR(double(kept) / total, 0.1, 0.006);
  EXPECT_NEAR(double(randomised) / total, 0.1, 0.006);
}

TEST(MegatronMasking, NgramLengthsAreDrawnWithProbabilityProportionalToOneOverN) {
  const auto& v = test_vocab_loaded();
  MaskingTrace trace;
  std::vector<int32_t> positions, labels;
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    NumpyRandomState rng(seed);
    std::vector<int32_t> tokens{v.cls_id()};
    for (int i = 0; i < 200; ++i) tokens.push_back(2000 + int32_t(rng.randint(0, 5000)));  // whole words
    tokens.push_back(v.sep_id());
    create_masked_lm_predictions(tokens, 509, 0.15, v, rng, positions, labels, &trace);
  }
  std::array<double, 4> drawn{}, accepted{};
  for (const int n : trace.drawn_n) drawn[size_t(n)] += 1.0 / double(trace.drawn_n.size());
  for (const int n : trace.accepted_n) accepted[size_t(n)] += 1.0 / double(trace.accepted_n.size());
  ASSERT_GT(trace.drawn_n.size(), 40000u);
  EXPECT_NEAR(drawn[1], 6.0 / 11.0, 0.008);
  EXPECT_NEAR(drawn[2], 3.0 / 11.0, 0.008);
  EXPECT_NEAR(drawn[3], 2.0 / 11.0, 0.008);
  // Accepted n-grams shrink only near the cap, so they stay close to the drawn law.
  EXPECT_NEAR(accepted[1], 6.0 / 11.0, 0.06);
  EXPECT_NEAR(accepted[3], 2.0 / 11.0, 0.04);
}

TEST(MegatronBertDataset, SameSeedSameSamplesOnAnyThreadCount) {
  const auto& ds = *sotu_datasets().train;
  const int P = sotu_config(1).max_predictions();
  const BertBatch serial = batch_of(ds, 0, 400, 128, P);
  BertBatch parallel;
  parallel.resize(400, 128, P);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = 399 - t; i >= 0; i -= 4) ds.get(i, parallel, int(i));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(serial.input_ids, parallel.input_ids);
  EXPECT_EQ(serial.masked_positions, parallel.masked_positions);
  EXPECT_EQ(serial.nsp_labels, parallel.nsp_labels);

  const auto rebuilt = build_megatron_bert_datasets(sotu_config(3000));
  const BertBatch again = batch_of(*rebuilt.train, 0, 400, 128, P);
  EXPECT_EQ(serial.input_ids, again.input_ids);
  EXPECT_EQ(serial.masked_ids, again.masked_ids);
  EXPECT_EQ(serial.segment_ids, again.segment_ids);

  MegatronDataConfig other = sotu_config(3000);
  other.seed = 4321;
  const BertBatch different = batch_of(*build_megatron_bert_datasets(other).train, 0, 400, 128, P);
  EXPECT_NE(serial.input_ids, different.input_ids);
}

// tests/data/megatron/megatron_sample_ref.py builds the same samples with numpy's RandomState
// from the spec; kiln's emulation must agree token for token.
TEST(MegatronBertDataset, MatchesNumpyReferenceImplementation) {
  const auto& ds = *sotu_datasets().train;
  const int P = sotu_config(1).max_predictions();
  const fs::path dir = kiln::data::testing::fresh_temp_dir("megatron-ref");
  nlohmann::json req{{"prefix", sotu_indexed_prefix()},
                     {"vocab", kiln::data::testing::test_vocab().string()},
                     {"seed", 1234},
                     {"seq_length", 128},
                     {"mask_prob", 0.15},
                     {"binary_head", true}};
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 60; ++i) indices.push_back(i * 37 % ds.size());
  for (const int64_t i : indices) {
    const SampleTriple& t = ds.part(0).triple(i);
    req["samples"].push_back({i, t.first, t.last, t.target});
  }
  kiln::data::testing::write_text(dir / "req.json", req.dump());
  const std::string cmd = "/usr/bin/python3 " + (fs::path(KILN_SOURCE_DIR) / "tests/data/megatron/megatron_sample_ref.py").string() +
                          " " + (dir / "req.json").string() + " " + (dir / "out.json").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto ref = nlohmann::json::parse(kiln::read_file(dir / "out.json"));
  BertBatch b;
  b.resize(1, 128, P);
  for (size_t k = 0; k < indices.size(); ++k) {
    ds.get(indices[k], b, 0);
    const auto& r = ref[k];
    const auto tokens = r["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(b.input_ids.begin(), b.input_ids.begin() + long(tokens.size())), tokens) << k;
    const auto types = r["types"].get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(b.segment_ids.begin(), b.segment_ids.begin() + long(types.size())), types) << k;
    const auto positions = r["positions"].get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(b.masked_positions.begin(), b.masked_positions.begin() + long(positions.size())),
              positions) << k;
    const auto labels = r["labels"].get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(b.masked_ids.begin(), b.masked_ids.begin() + long(labels.size())), labels) << k;
    EXPECT_EQ(b.nsp_labels[0], r["is_random"].get<int>()) << k;
  }
}

TEST(MegatronBertDataset, BlendsTwoPrefixesByWeight) {
  MegatronDataConfig c = sotu_config(2000);
  c.valid_samples = 0;
  c.data = parse_data_path({"0.3", sotu_indexed_prefix(), "0.7", sotu_indexed_prefix()});
  const auto ds = build_megatron_bert_datasets(c);
  ASSERT_TRUE(ds.train);
  EXPECT_EQ(ds.valid, nullptr);
  EXPECT_EQ(ds.train->size(), 2000);
  int64_t second = 0;
  for (int64_t i = 0; i < 2000; ++i) second += ds.train->locate(i).first;
  EXPECT_EQ(second, 1400);
  EXPECT_GE(ds.train->part(0).size(), 603);   // ceil(600 * 1.005)
  EXPECT_GE(ds.train->part(1).size(), 1407);  // ceil(1400 * 1.005)
  EXPECT_EQ(error_of([&] { ds.train->locate(2000); }), "Megatron BERT dataset: sample 2000 out of range [0, 2000)");

  c.data = parse_data_path({sotu_indexed_prefix(), sotu_indexed_prefix()});  // weighted by length
  const auto unweighted = build_megatron_bert_datasets(c);
  EXPECT_EQ(unweighted.train->size(), std::min<int64_t>(2000, 2 * unweighted.train->part(0).size()));
}

TEST(MegatronBertDataset, FailsFastOnUnusableSplitsAndConfig) {
  MegatronDataConfig c = sotu_config(100);
  c.test_samples = 10;  // 1 per mille of ~33 addresses is no document at all
  const std::string p = sotu_indexed_prefix();
  EXPECT_TRUE(error_of([&] { build_megatron_bert_datasets(c); }).starts_with(p + " (test split): no documents ("))
      << error_of([&] { build_megatron_bert_datasets(c); });
  c.test_samples = 0;
  c.split = "1,2";
  EXPECT_EQ(error_of([&] { build_megatron_bert_datasets(c); }),
            "--split \"1,2\": expected three non-negative numbers like 949,50,1");
  c.split = "949,50,1";
  c.data.weights = {0.0};
  EXPECT_EQ(error_of([&] { build_megatron_bert_datasets(c); }),
            "--data-path: weights must be non-negative and sum to a positive number");

  // Documents prepared without --split-sentences have one sentence: no SOP samples.
  const fs::path dir = kiln::data::testing::fresh_temp_dir("megatron-docs");
  kiln::data::testing::write_sotu_jsonl(dir / "w.jsonl", 100000, 5000000);
  kiln::data::PrepareIndexedOptions o;
  o.input = dir / "w.jsonl";
  o.vocab = kiln::data::testing::test_vocab();
  o.output_prefix = (dir / "w").string();
  o.progress = false;
  const std::string doc_prefix = kiln::data::prepare_indexed(o).prefixes[0];
  c = sotu_config(100);
  c.data = parse_data_path({doc_prefix});
  c.valid_samples = 0;
  EXPECT_TRUE(error_of([&] { build_megatron_bert_datasets(c); })
                  .starts_with(doc_prefix + " (train split): no samples: every document has fewer than 2 sentences"));
  c.binary_head = false;
  const auto ds = build_megatron_bert_datasets(c);
  BertBatch b;
  b.resize(1, 128, c.max_predictions());
  ds.train->get(0, b, 0);
  EXPECT_EQ(b.nsp_labels[0], 0);
  EXPECT_EQ(b.segment_ids[1], 0);
}

}  // namespace
