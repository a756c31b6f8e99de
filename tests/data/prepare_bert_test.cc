#include "kiln/data/bert/prepare_bert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/bert/sample_set.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

// Two input files (documents split between them) and an eval file, under `dir`.
void write_inputs(const fs::path& dir) {
  const std::string text = testing::sotu_sentences(90000, 10);
  const size_t cut = text.find("\n\n", text.size() / 3);
  const size_t eval_cut = text.find("\n\n", text.size() * 4 / 5);
  fs::create_directories(dir / "text");
  testing::write_text(dir / "text" / "b.txt", text.substr(cut, eval_cut - cut));
  testing::write_text(dir / "text" / "a.txt", text.substr(0, cut));
  testing::write_text(dir / "eval.txt", text.substr(eval_cut));
}

PrepareBertOptions small_options(const fs::path& dir, const std::string& out) {
  PrepareBertOptions o;
  o.inputs = {dir / "text"};
  o.vocab = testing::test_vocab();
  o.output = dir / out;
  o.instance.max_seq_length = 64;
  o.instance.max_predictions = 10;
  o.instance.dupe_factor = 2;
  o.eval_samples = 10;  // the held-out addresses give 13 eval instances
  o.sampling = Sampling::philox;  // parts of documents_per_part, the integer eval stride
  o.documents_per_part = 5;
  o.progress = false;
  return o;
}

std::map<std::string, std::string> read_tree(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) files[fs::relative(e.path(), root).string()] = read_file(e.path());
  return files;
}

template <typename F>
void expect_error(F&& f, const std::string& what1, const std::string& what2) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(what1), std::string::npos) << msg;
    EXPECT_NE(msg.find(what2), std::string::npos) << msg;
  }
}

TEST(PrepareBert, OutputIsIdenticalForAnyWorkerCount) {
  const fs::path dir = testing::fresh_temp_dir("prepare-workers");
  write_inputs(dir);
  PrepareBertOptions o = small_options(dir, "w1");
  o.workers = 1;
  const PrepareBertResult r1 = prepare_bert(o);
  o.output = dir / "w3";
  o.workers = 3;
  const PrepareBertResult r3 = prepare_bert(o);
  EXPECT_GT(r1.train_parts, 3);
  EXPECT_EQ(r1.train_samples, r3.train_samples);
  const auto t1 = read_tree(dir / "w1"), t3 = read_tree(dir / "w3");
  ASSERT_EQ(t1.size(), size_t(r1.train_parts) + 2);  // shards, eval.kbs, manifest.json
  EXPECT_TRUE(t1 == t3) << "outputs differ between 1 and 3 workers";

  // The manifest, the shards and the result agree.
  const auto manifest = nlohmann::json::parse(t1.at("manifest.json"));
  const BertSampleSet train = BertSampleSet::open(dir / "w1" / "train");
  const BertSampleSet eval = BertSampleSet::open(dir / "w1" / "eval.kbs");
  EXPECT_EQ(train.size(), r1.train_samples);
  EXPECT_EQ(manifest["train"]["samples"].get<int64_t>(), r1.train_samples);
  EXPECT_EQ(eval.size(), 10);
  EXPECT_EQ(manifest["eval"]["samples"].get<int64_t>(), 10);
  EXPECT_EQ(manifest["vocab"]["size"].get<int>(), 30522);
  EXPECT_EQ(train.seq_len(), 64);
  EXPECT_EQ(train.max_pred(), 10);
  EXPECT_EQ(r1.eval_documents, std::max<int64_t>(1, (r1.train_documents + r1.eval_documents) / 20));
  BertBatch batch;
  batch.resize(1, 64, 10);
  for (int64_t i = 0; i < train.size(); ++i) {
    train.read(i, batch, 0);
    ASSERT_EQ(batch.input_ids[0], 101);
    ASSERT_TRUE(batch.nsp_labels[0] == 0 || batch.nsp_labels[0] == 1);
  }

  // Another seed gives other samples.
  o.output = dir / "seed2";
  o.seed = 2;
  prepare_bert(o);
  EXPECT_NE(read_file(dir / "seed2" / "train" / "part-00000.kbs"), t1.at("train/part-00000.kbs"));
  fs::remove_all(dir);
}

TEST(PrepareBert, EvalSetKeepsTheReferenceStride) {
  const fs::path dir = testing::fresh_temp_dir("prepare-eval");
  write_inputs(dir);
  PrepareBertOptions o = small_options(dir, "all");
  o.eval_input = dir / "eval.txt";
  o.eval_samples = 1000000;  // more than are generated: all are kept
  o.workers = 2;
  const PrepareBertResult all = prepare_bert(o);
  EXPECT_EQ(all.eval_samples, all.eval_instances);
  ASSERT_GT(all.eval_instances, 40);
  o.output = dir / "picked";
  o.eval_samples = 13;
  const PrepareBertResult picked = prepare_bert(o);
  EXPECT_EQ(picked.eval_samples, 13);
  const BertSampleSet a = BertSampleSet::open(dir / "all" / "eval.kbs");
  const BertSampleSet p = BertSampleSet::open(dir / "picked" / "eval.kbs");
  ASSERT_EQ(p.size(), 13);
  const size_t record = p.view(0).layout->record_size();
  for (int64_t k = 0; k < 13; ++k)
    EXPECT_EQ(std::memcmp(p.view(k).record, a.view(k * all.eval_instances / 13).record, record), 0) << k;
  // With an eval file no training document is held out.
  o.output = dir / "held-out";
  o.eval_input.clear();
  const PrepareBertResult held_out = prepare_bert(o);
  EXPECT_EQ(held_out.train_documents + held_out.eval_documents, picked.train_documents);
  EXPECT_GT(held_out.eval_documents, 0);
  fs::remove_all(dir);
}

TEST(PrepareBert, BadInputsAndOutputsAreOneLineErrors) {
  const fs::path dir = testing::fresh_temp_dir("prepare-errors");
  write_inputs(dir);
  PrepareBertOptions o = small_options(dir, "out");
  o.inputs = {dir / "nope.txt"};
  expect_error([&] { prepare_bert(o); }, (dir / "nope.txt").string(), "not found");

  testing::write_text(dir / "blank.txt", "\n  \n\n");
  o.inputs = {dir / "blank.txt"};
  expect_error([&] { prepare_bert(o); }, (dir / "blank.txt").string(), "no documents");

  o.inputs = {dir / "text"};
  testing::write_text(dir / "file", "x");
  o.output = dir / "file" / "out";
  expect_error([&] { prepare_bert(o); }, (dir / "file").string(), "");

  o.output = dir / "out";
  o.eval_input = dir / "missing-eval.txt";
  expect_error([&] { prepare_bert(o); }, (dir / "missing-eval.txt").string(), "not found");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::data
