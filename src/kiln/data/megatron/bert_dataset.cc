#include "kiln/data/megatron/bert_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "kiln/core/error.h"
#include "kiln/data/megatron/masking.h"
#include "kiln/data/megatron/numpy_random.h"

namespace kiln::data::megatron {

namespace {

constexpr double kBlendSurplus = 0.005;  // Megatron's mid_level_dataset_surplus
constexpr const char* kSplitNames[3] = {"train", "valid", "test"};

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

// A token range [begin, end) of one sample's concatenated sentences.
struct Segment {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

}  // namespace

DataBlend parse_data_path(const std::vector<std::string>& words) {
  KILN_CHECK(!words.empty(), "--data-path: no dataset prefix given");
  DataBlend blend;
  double first = 0;
  if (!parse_number(words[0], first)) {
    blend.prefixes = words;
    return blend;
  }
  KILN_CHECK(words.size() % 2 == 0,
             "--data-path: {} words; the weighted form needs pairs \"weight prefix ...\"", words.size());
  double sum = 0;
  for (size_t i = 0; i < words.size(); i += 2) {
    double w = 0;
    KILN_CHECK(parse_number(words[i], w) && w >= 0, "--data-path: weight \"{}\" is not a non-negative number",
               words[i]);
    blend.weights.push_back(w);
    blend.prefixes.push_back(words[i + 1]);
    sum += w;
  }
  KILN_CHECK(sum > 0, "--data-path: weights must sum to a positive number");
  return blend;
}

int MegatronDataConfig::max_predictions() const { return max_masked_predictions(masked_lm_prob, seq_length); }

MegatronBertSplit::MegatronBertSplit(std::shared_ptr<const IndexedDataset> data, int64_t doc_begin, int64_t doc_end,
                                     const MegatronDataConfig& c, int64_t num_samples, int64_t max_epochs,
                                     std::string name)
    : data_(std::move(data)),
      vocab_(c.vocab),
      seq_length_(c.seq_length),
      masked_lm_prob_(c.masked_lm_prob),
      binary_head_(c.binary_head),
      seed_(c.seed),
      name_(std::move(name)) {
  MappingOptions o;
  o.max_len = c.seq_length - 3;
  o.short_seq_prob = c.short_seq_prob;
  o.seed = uint32_t(c.seed);
  o.min_sentences = c.binary_head ? 2 : 1;
  o.num_samples = num_samples;
  o.max_epochs = max_epochs;
  samples_ = build_sample_mapping(*data_, doc_begin, doc_end, o, name_);
}

void MegatronBertSplit::get(int64_t index, BertBatch& batch, int slot) const {
  KILN_CHECK(index >= 0 && index < size(), "{}: sample {} out of range [0, {})", name_, index, size());
  KILN_CHECK(batch.seq_len == seq_length_ && slot >= 0 && slot < batch.batch,
             "{}: batch of seq_len {} (slot {} of {}) does not fit seq_length {}", name_, batch.seq_len, slot,
             batch.batch, seq_length_);
  const SampleTriple& t = samples_[size_t(index)];
  const Vocab& vocab = *vocab_;
  NumpyRandomState rng(uint32_t((seed_ + uint64_t(index)) & 0xFFFFFFFFull));

  std::vector<int32_t> text;
  std::vector<size_t> bounds{0};
  for (int64_t s = t.first; s < t.last; ++s) {
    data_->append_sequence(s, text);
    bounds.push_back(text.size());
  }
  for (const int32_t id : text)
    KILN_CHECK(id >= 0 && id < vocab.size(),
               "{}: sample {}: token id {} outside the vocabulary of {} (another vocab?)", name_, index,
               id, vocab.size());

  const int64_t n = t.last - t.first;
  int64_t pivot = n;
  bool swapped = false;
  if (binary_head_) {
    KILN_CHECK(n > 1, "{}: sample {} has one sentence; the binary head needs two", name_, index);
    pivot = n >= 3 ? rng.randint(1, n) : 1;
    swapped = rng.random() < 0.5;
  }
  Segment a{0, bounds[size_t(pivot)]}, b{bounds[size_t(pivot)], text.size()};
  if (swapped) std::swap(a, b);
  while (int64_t(a.size() + b.size()) > t.target) {
    Segment& longer = a.size() > b.size() ? a : b;
    if (rng.random() < 0.5) {
      ++longer.begin;
    } else {
      --longer.end;
    }
  }

  std::vector<int32_t> tokens, types;
  tokens.reserve(a.size() + b.size() + 3);
  tokens.push_back(vocab.cls_id());
  tokens.insert(tokens.end(), text.begin() + long(a.begin), text.begin() + long(a.end));
  tokens.push_back(vocab.sep_id());
  types.assign(tokens.size(), 0);
  if (b.size() > 0) {
    tokens.insert(tokens.end(), text.begin() + long(b.begin), text.begin() + long(b.end));
    tokens.push_back(vocab.sep_id());
    types.resize(tokens.size(), 1);
  }

  std::vector<int32_t> positions, labels;
  create_masked_lm_predictions(tokens, t.target, masked_lm_prob_, vocab, rng, positions, labels);
  KILN_CHECK(int(positions.size()) <= batch.max_pred, "{}: {} predictions exceed the batch's max_pred {}", name_,
             positions.size(), batch.max_pred);

  const size_t s0 = size_t(slot) * size_t(batch.seq_len), p0 = size_t(slot) * size_t(batch.max_pred);
  for (size_t i = 0; i < size_t(batch.seq_len); ++i) {
    const int32_t id = i < tokens.size() ? tokens[i] : vocab.pad_id();
    batch.input_ids[s0 + i] = id;
    batch.segment_ids[s0 + i] = i < types.size() ? types[i] : 0;
    // Megatron's padding_mask is "token != pad id", even for a random [PAD] inside the text.
    batch.input_mask[s0 + i] = id != vocab.pad_id() ? 1 : 0;
  }
  for (size_t k = 0; k < size_t(batch.max_pred); ++k) {
    const bool real = k < positions.size();
    batch.masked_positions[p0 + k] = real ? positions[k] : 0;
    batch.masked_ids[p0 + k] = real ? labels[k] : 0;
    batch.masked_weights[p0 + k] = real ? 1.0f : 0.0f;
  }
  batch.nsp_labels[size_t(slot)] = swapped ? 1 : 0;
  check_bert_row(batch, slot, vocab.size(), name_, index);
}

MegatronBertDataset::MegatronBertDataset(std::unique_ptr<MegatronBertSplit> single) {
  size_ = single->size();
  parts_.push_back(std::move(single));
}

MegatronBertDataset::MegatronBertDataset(std::vector<std::unique_ptr<MegatronBertSplit>> parts,
                                         const std::vector<double>& weights, int64_t size)
    : parts_(std::move(parts)), blend_(build_blending_index(weights, size)), size_(size) {
  std::vector<int64_t> used(parts_.size(), 0);
  for (const auto& [d, s] : blend_) used[size_t(d)] = std::max(used[size_t(d)], s + 1);
  for (size_t d = 0; d < parts_.size(); ++d)
    KILN_CHECK(used[d] <= parts_[d]->size(), "blend needs {} samples of a part that has {}", used[d],
               parts_[d]->size());
}

std::pair<int, int64_t> MegatronBertDataset::locate(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size_, "Megatron BERT dataset: sample {} out of range [0, {})", index, size_);
  if (blend_.empty()) return {0, index};
  return {blend_[size_t(index)].first, blend_[size_t(index)].second};
}

void MegatronBertDataset::get(int64_t index, BertBatch& batch, int slot) const {
  const auto [part, local] = locate(index);
  parts_[size_t(part)]->get(local, batch, slot);
}

MegatronBertDatasets build_megatron_bert_datasets(const MegatronDataConfig& c) {
  KILN_CHECK(c.vocab != nullptr, "Megatron BERT data: no vocabulary given");
  KILN_CHECK(c.seq_length >= 5, "--seq-length {}: too short for [CLS] A [SEP] B [SEP]", c.seq_length);
  KILN_CHECK(c.masked_lm_prob > 0 && c.masked_lm_prob <= 1, "--mask-prob {}: must be in (0, 1]", c.masked_lm_prob);
  KILN_CHECK(c.short_seq_prob >= 0 && c.short_seq_prob <= 1, "--short-seq-prob {}: must be in [0, 1]",
             c.short_seq_prob);
  const DataBlend& blend = c.data;
  KILN_CHECK(!blend.prefixes.empty(), "--data-path: no dataset prefix given");
  KILN_CHECK(blend.weights.empty() || blend.weights.size() == blend.prefixes.size(),
             "--data-path: {} weights for {} prefixes", blend.weights.size(), blend.prefixes.size());
  std::vector<double> weights = blend.weights;
  if (!weights.empty()) {
    const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
    KILN_CHECK(sum > 0 && std::all_of(weights.begin(), weights.end(), [](double w) { return w >= 0; }),
               "--data-path: weights must be non-negative and sum to a positive number");
    for (double& w : weights) w /= sum;
  }
  const std::array<double, 3> split = parse_split(c.split);
  std::vector<std::shared_ptr<const IndexedDataset>> data;
  for (const std::string& p : blend.prefixes) data.push_back(IndexedDataset::open(p));

  MegatronBertDatasets out;
  const int64_t requested[3] = {c.train_samples, c.valid_samples, c.test_samples};
  std::unique_ptr<MegatronBertDataset>* targets[3] = {&out.train, &out.valid, &out.test};
  for (int s = 0; s < 3; ++s) {
    if (requested[s] <= 0) continue;
    std::vector<std::unique_ptr<MegatronBertSplit>> parts;
    for (size_t d = 0; d < data.size(); ++d) {
      const auto range = split_documents(split, s, data[d]->num_documents());
      if (!range) break;  // zero-width split: the same for every prefix
      const std::string name = fmt::format("{} ({} split)", blend.prefixes[d], kSplitNames[s]);
      KILN_CHECK(range->second > range->first, "{}: no documents ({} in the dataset, --split {})", name,
                 data[d]->num_documents(), c.split);
      int64_t want = requested[s], epochs = 2147483646;
      if (data.size() > 1 && !weights.empty()) {
        want = int64_t(std::ceil(std::ceil(double(requested[s]) * weights[d]) * (1.0 + kBlendSurplus)));
      } else if (data.size() > 1) {
        want = INT64_MAX;
        epochs = 1;
      }
      parts.push_back(std::make_unique<MegatronBertSplit>(data[d], range->first, range->second, c, want, epochs, name));
    }
    if (parts.empty()) continue;
    if (parts.size() == 1) {
      *targets[s] = std::make_unique<MegatronBertDataset>(std::move(parts[0]));
      continue;
    }
    std::vector<double> w = weights;
    int64_t size = requested[s];
    if (w.empty()) {
      int64_t total = 0;
      for (const auto& p : parts) {
        w.push_back(double(p->size()));
        total += p->size();
      }
      for (double& x : w) x /= double(total);
      size = std::min(size, total);
    }
    *targets[s] = std::make_unique<MegatronBertDataset>(std::move(parts), w, size);
  }
  return out;
}

}  // namespace kiln::data::megatron
