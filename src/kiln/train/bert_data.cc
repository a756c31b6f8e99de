#include "kiln/train/bert_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/bert/loaders.h"
#include "kiln/data/bert/sample_set.h"
#include "kiln/data/megatron/bert_dataset.h"
#include "kiln/data/text/vocab.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

// `kiln prepare bert` output: DIR/train/*.kbs, DIR/eval.kbs, DIR/manifest.json.
class ShardData : public BertDataSource {
 public:
  explicit ShardData(const BertTrainConfig& c)
      : train_set_(data::BertSampleSet::open(fs::path(c.data_dir) / "train")),
        eval_set_(data::BertSampleSet::open(fs::path(c.data_dir) / "eval.kbs")),
        loader_(train_set_, int(c.micro_batch_size), uint64_t(c.seed)) {
    seq_len_ = train_set_.seq_len();
    max_pred_ = train_set_.max_pred();
    eval_samples_ = std::min<int64_t>(c.eval_samples, eval_set_.size());
    vocab_size_ = train_set_.vocab_size();
  }
  void next_train(data::BertBatch& batch, int) override { loader_.next(batch); }
  void seek(uint64_t position) override { loader_.seek(position); }
  void begin_eval(int64_t) override { seen_ = 0; eval_.reset(); }
  bool next_eval(data::BertBatch& batch, int batch_size) override {
    if (!eval_) eval_.emplace(eval_set_, batch_size);
    if (seen_ >= eval_samples_ || !eval_->next(batch)) return false;
    seen_ += batch.batch;
    return true;
  }

 private:
  data::BertSampleSet train_set_, eval_set_;
  data::BertTrainLoader loader_;
  std::optional<data::BertEvalLoader> eval_;
  int64_t seen_ = 0;
};

// Megatron's indexed datasets: train and validation splits, masked per sample index.
class MegatronData : public BertDataSource {
 public:
  explicit MegatronData(const BertTrainConfig& c) : vocab_(data::Vocab::load(c.vocab_file)) {
    std::vector<std::string> words;
    std::istringstream in(c.data_path);
    for (std::string w; in >> w;) words.push_back(w);
    data::megatron::MegatronDataConfig m;
    m.data = data::megatron::parse_data_path(words);
    m.split = c.split;
    m.seq_length = int(c.seq_length);
    m.masked_lm_prob = c.masked_lm_prob;
    m.short_seq_prob = c.short_seq_prob;
    m.binary_head = !c.no_binary_head;
    m.seed = uint64_t(c.seed);
    m.vocab = &vocab_;
    // Megatron's sample counts: the whole run, every evaluation, one test pass.
    const int64_t evals = c.train_steps / c.eval_interval + 1;
    eval_batches_ = c.eval_iters;
    m.train_samples = c.train_steps * c.global_batch_size;
    m.valid_samples = evals * c.eval_iters * c.eval_batch_size;
    m.test_samples = c.eval_iters * c.eval_batch_size;
    sets_ = data::megatron::build_megatron_bert_datasets(m);
    if (!sets_.train) throw Error("--split {}: the train split is empty", c.split);
    seq_len_ = m.seq_length;
    max_pred_ = m.max_predictions();
    eval_samples_ = sets_.valid ? c.eval_iters * c.eval_batch_size : 0;
    vocab_size_ = vocab_.size();
  }
  void next_train(data::BertBatch& batch, int batch_size) override {
    fill(*sets_.train, consumed_, batch, batch_size);
    consumed_ += uint64_t(batch_size);
  }
  void seek(uint64_t position) override { consumed_ = position; }
  void begin_eval(int64_t index) override {
    eval_next_ = uint64_t(index * eval_samples_);
    eval_left_ = sets_.valid ? eval_batches_ : 0;
  }
  bool next_eval(data::BertBatch& batch, int batch_size) override {
    if (eval_left_-- <= 0) return false;
    fill(*sets_.valid, eval_next_, batch, batch_size);
    eval_next_ += uint64_t(batch_size);
    return true;
  }

 private:
  void fill(const data::megatron::MegatronBertDataset& set, uint64_t first, data::BertBatch& batch,
            int batch_size) const {
    batch.resize(batch_size, seq_len_, max_pred_);
    for (int i = 0; i < batch_size; ++i) set.get(int64_t((first + uint64_t(i)) % uint64_t(set.size())), batch, i);
  }

  data::Vocab vocab_;
  data::megatron::MegatronBertDatasets sets_;
  uint64_t consumed_ = 0, eval_next_ = 0;
  int64_t eval_batches_ = 0, eval_left_ = 0;
};

// Random batches, a pure function of (seed, position / batch size).
class FakeData : public BertDataSource {
 public:
  explicit FakeData(const BertTrainConfig& c) : c_(c) {
    if (c.seq_length <= 0) throw Error("config: data.seq_length must be set with fake data");
    seq_len_ = int(c.seq_length);
    max_pred_ = int(c.max_predictions);
    eval_samples_ = std::min(c.eval_iters, std::max<int64_t>(c.benchmark, 1)) * c.eval_batch_size;
  }
  void next_train(data::BertBatch& batch, int batch_size) override {
    data::fill_fake_batch(batch, batch_size, seq_len_, max_pred_, int(c_.vocab_size),
                          uint64_t(c_.seed), position_ / uint64_t(batch_size));
    position_ += uint64_t(batch_size);
  }
  void seek(uint64_t position) override { position_ = position; }
  void begin_eval(int64_t) override { eval_step_ = 0; }
  bool next_eval(data::BertBatch& batch, int batch_size) override {
    if (eval_step_ * batch_size >= eval_samples_) return false;
    data::fill_fake_batch(batch, batch_size, seq_len_, max_pred_, int(c_.vocab_size),
                          uint64_t(c_.seed) + 1, uint64_t(eval_step_++));
    return true;
  }

 private:
  const BertTrainConfig& c_;
  uint64_t position_ = 0;
  int64_t eval_step_ = 0;
};

}  // namespace

std::unique_ptr<BertDataSource> open_bert_data(const BertTrainConfig& c) {
  std::unique_ptr<BertDataSource> source;
  if (c.fake_data) source = std::make_unique<FakeData>(c);
  else if (!c.data_path.empty()) source = std::make_unique<MegatronData>(c);
  else source = std::make_unique<ShardData>(c);
  if (!c.fake_data && c.seq_length && c.seq_length != source->seq_len())
    throw Error("config: data.seq_length is {} but {} holds sequences of {}", c.seq_length,
                c.data_dir, source->seq_len());
  return source;
}

}  // namespace kiln::train
