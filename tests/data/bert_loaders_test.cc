#include "kiln/data/bert/loaders.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <set>

#include "data_test_util.h"
#include "kiln/core/error.h"
#include "kiln/data/bert/sample_shard.h"

namespace kiln::data {
namespace {

// A shard of `count` samples whose first token is 1000 + index, so rows identify samples.
BertSampleSet make_set(const std::filesystem::path& path, int count) {
  SampleShardBuilder b(ShardLayout{8, 3, TokenDType::u16}, 30522);
  for (int i = 0; i < count; ++i) {
    BertSample s;
    s.input_ids = {1000 + i, 7, 8, 9};
    s.segment_ids = {0, 0, 1, 1};
    s.masked_positions = {1, 2};
    s.masked_ids = {5, 6};
    s.next_sentence_label = i % 2;
    b.add(s);
  }
  b.write(path);
  return BertSampleSet::open(path);
}

std::vector<int> sample_ids(const BertBatch& batch) {
  std::vector<int> ids;
  for (int r = 0; r < batch.batch; ++r) ids.push_back(batch.input_ids[size_t(r) * size_t(batch.seq_len)] - 1000);
  return ids;
}

TEST(BertTrainLoader, EachEpochIsAPermutationThatChangesWithEpochAndSeed) {
  const auto dir = testing::fresh_temp_dir("train-loader");
  const BertSampleSet set = make_set(dir / "s.kbs", 37);
  BertTrainLoader loader(set, 1, 42);
  std::vector<std::vector<int>> epochs(3);
  BertBatch batch;
  for (auto& epoch : epochs) {
    for (int i = 0; i < 37; ++i) {
      loader.next(batch);
      epoch.push_back(sample_ids(batch)[0]);
    }
    std::vector<int> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 37; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  std::vector<int> identity(37);
  for (int i = 0; i < 37; ++i) identity[size_t(i)] = i;
  EXPECT_NE(epochs[0], identity);
  BertTrainLoader other_seed(set, 37, 43);
  other_seed.next(batch);
  EXPECT_NE(sample_ids(batch), epochs[0]);
  EXPECT_EQ(loader.position(), 3u * 37u);
  std::filesystem::remove_all(dir);
}

TEST(BertTrainLoader, SeekResumesTheUninterruptedBatchSequence) {
  const auto dir = testing::fresh_temp_dir("train-seek");
  const BertSampleSet set = make_set(dir / "s.kbs", 10);
  BertTrainLoader loader(set, 4, 7);
  std::vector<BertBatch> reference(12);
  for (auto& b : reference) loader.next(b);
  for (int k : {0, 1, 2, 5, 11}) {
    BertTrainLoader resumed(set, 4, 7);
    resumed.seek(uint64_t(k) * 4);
    for (int step = k; step < 12; ++step) {
      BertBatch b;
      resumed.next(b);
      ASSERT_EQ(b.input_ids, reference[size_t(step)].input_ids) << "resume at " << k << ", step " << step;
      ASSERT_EQ(b.nsp_labels, reference[size_t(step)].nsp_labels);
      ASSERT_EQ(b.masked_weights, reference[size_t(step)].masked_weights);
    }
    EXPECT_EQ(resumed.position(), 48u);
  }
  std::filesystem::remove_all(dir);
}

TEST(BertEvalLoader, IteratesInOrderAndPadsTheLastBatch) {
  const auto dir = testing::fresh_temp_dir("eval-loader");
  const BertSampleSet set = make_set(dir / "s.kbs", 10);
  BertEvalLoader loader(set, 4);
  BertBatch batch;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<int> seen;
    int batches = 0;
    while (loader.next(batch)) {
      ++batches;
      for (int r = 0; r < 4; ++r) {
        const bool real = batches * 4 - 4 + r < 10;
        if (real) {
          seen.push_back(sample_ids(batch)[size_t(r)]);
          EXPECT_EQ(batch.nsp_labels[size_t(r)], seen.back() % 2);
          EXPECT_EQ(batch.masked_weights[size_t(r) * 3], 1.0f);
        } else {
          EXPECT_EQ(batch.nsp_labels[size_t(r)], -1);
          for (int k = 0; k < 3; ++k) EXPECT_EQ(batch.masked_weights[size_t(r) * 3 + size_t(k)], 0.0f);
          for (int s = 0; s < 8; ++s) EXPECT_EQ(batch.input_mask[size_t(r) * 8 + size_t(s)], 0);
        }
      }
    }
    EXPECT_EQ(batches, 3);
    EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_FALSE(loader.next(batch));
    loader.reset();
  }
  std::filesystem::remove_all(dir);
}

TEST(FakeBertBatch, IsDeterministicAndInRange) {
  BertBatch a, b, c;
  fill_fake_batch(a, 3, 16, 4, 100, 5, 9);
  fill_fake_batch(b, 3, 16, 4, 100, 5, 9);
  fill_fake_batch(c, 3, 16, 4, 100, 5, 10);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.masked_positions, b.masked_positions);
  EXPECT_NE(a.input_ids, c.input_ids);
  ASSERT_EQ(a.input_ids.size(), 48u);
  std::set<int32_t> distinct(a.input_ids.begin(), a.input_ids.end());
  EXPECT_GT(distinct.size(), 20u);
  for (const int32_t id : a.input_ids) EXPECT_TRUE(id >= 0 && id < 100);
  for (const int32_t p : a.masked_positions) EXPECT_TRUE(p >= 0 && p < 16);
  for (const int32_t l : a.nsp_labels) EXPECT_TRUE(l == 0 || l == 1);
}

// One bad sample (index 2 of 4) in a shard whose header says vocab 100.
BertSampleSet make_bad_set(const std::filesystem::path& path, const std::function<void(BertSample&)>& spoil) {
  SampleShardBuilder b(ShardLayout{8, 3, TokenDType::u16}, 100);
  for (int i = 0; i < 4; ++i) {
    BertSample s;
    s.input_ids = {2, 7, 8, 99};
    s.segment_ids = {0, 0, 1, 1};
    s.masked_positions = {1, 2};
    s.masked_ids = {5, 99};
    s.next_sentence_label = 1;
    if (i == 2) spoil(s);
    b.add(s);
  }
  b.write(path);
  return BertSampleSet::open(path);
}

// The message names the sample and the value; the loss and gather ops assume valid ids.
void expect_load_error(const BertSampleSet& set, const std::string& what) {
  BertEvalLoader eval(set, 4);
  BertBatch batch;
  try {
    eval.next(batch);
    ADD_FAILURE() << "no error for " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sample 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  BertTrainLoader train(set, 4, 1);
  EXPECT_THROW(train.next(batch), Error) << what;
}

TEST(BertLoaders, OutOfRangeIdsAndLabelsAreCaughtWhereTheSampleIsRead) {
  const auto dir = testing::fresh_temp_dir("bad-ids");
  expect_load_error(make_bad_set(dir / "a.kbs", [](BertSample& s) { s.input_ids[3] = 100; }), "input id 100");
  expect_load_error(make_bad_set(dir / "b.kbs", [](BertSample& s) { s.masked_ids[1] = 4000; }), "masked id 4000");
  expect_load_error(make_bad_set(dir / "c.kbs", [](BertSample& s) { s.next_sentence_label = 2; }), "label 2");
  expect_load_error(make_bad_set(dir / "d.kbs", [](BertSample& s) { s.segment_ids[0] = 3; }), "segment id 3");
  expect_load_error(make_bad_set(dir / "e.kbs", [](BertSample& s) { s.masked_positions[0] = 9; }),
                    "masked position 9");
  // The good rows load, with the largest id the vocab allows.
  const BertSampleSet good = make_bad_set(dir / "f.kbs", [](BertSample&) {});
  BertEvalLoader eval(good, 4);
  BertBatch batch;
  ASSERT_TRUE(eval.next(batch));
  EXPECT_EQ(batch.input_ids[3], 99);
  std::filesystem::remove_all(dir);
}

TEST(BertBatch, CheckRowAcceptsPaddingRowsAndFakeBatches) {
  BertBatch batch;
  fill_fake_batch(batch, 3, 16, 4, 50, 1, 2);
  for (int r = 0; r < 3; ++r) EXPECT_NO_THROW(check_bert_row(batch, r, 50, "fake", r));
  batch.clear_row(1);
  EXPECT_NO_THROW(check_bert_row(batch, 1, 50, "fake", 1));
  batch.input_ids[0] = -1;
  EXPECT_THROW(check_bert_row(batch, 0, 50, "fake", 0), Error);
  batch.input_ids[0] = 3;
  batch.masked_ids[0] = 50;
  EXPECT_THROW(check_bert_row(batch, 0, 50, "fake", 0), Error);
  EXPECT_NO_THROW(check_bert_row(batch, 0, 0, "fake", 0));  // vocab not recorded: ids only >= 0
}

}  // namespace
}  // namespace kiln::data
