#include "kiln/data/megatron/sample_mapping.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "kiln/core/error.h"

namespace kiln::data::megatron {

std::array<double, 3> parse_split(const std::string& split) {
  std::array<double, 3> w{};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t comma = split.find(',', pos);
    const std::string part = split.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    w[size_t(i)] = std::strtod(part.c_str(), &end);
    const bool last = i == 2;
    KILN_CHECK(!part.empty() && end == part.c_str() + part.size() && std::isfinite(w[size_t(i)]) &&
                   w[size_t(i)] >= 0 && (last ? comma == std::string::npos : comma != std::string::npos),
               "--split \"{}\": expected three non-negative numbers like 949,50,1", split);
    pos = comma + 1;
  }
  const double sum = w[0] + w[1] + w[2];
  KILN_CHECK(sum > 0, "--split \"{}\": the three numbers must not all be zero", split);
  for (double& x : w) x /= sum;
  return w;
}

std::optional<std::pair<int64_t, int64_t>> split_documents(const std::array<double, 3>& split, int split_index,
                                                           int64_t num_documents) {
  double lo = 0;
  for (int i = 0; i < split_index; ++i) lo += split[size_t(i)];
  const double hi = lo + split[size_t(split_index)];
  if (!(hi - lo > 0)) return std::nullopt;
  // std::nearbyint rounds half to even in the default rounding mode, as Python's round().
  return std::pair{int64_t(std::nearbyint(lo * double(num_documents))),
                   int64_t(std::nearbyint(hi * double(num_documents)))};
}

namespace {

int32_t target_length(int32_t short_seq_ratio, int32_t max_len, std::mt19937& rng) {
  if (short_seq_ratio == 0) return max_len;
  const uint32_t r = uint32_t(rng());
  if (r % uint32_t(short_seq_ratio) == 0) return int32_t(2 + r % uint32_t(max_len - 1));
  return max_len;
}

}  // namespace

std::vector<SampleTriple> build_sample_mapping(const IndexedDataset& data, int64_t doc_begin, int64_t doc_end,
                                               const MappingOptions& o, const std::string& what) {
  KILN_CHECK(o.max_len >= 2, "{}: sequence length too short for BERT samples", what);
  const int32_t ratio = o.short_seq_prob > 0 ? int32_t(std::lround(1.0 / o.short_seq_prob)) : 0;
  // Megatron counts in one pass and fills in a second with the RNG re-seeded; one pass that
  // appends gives the same samples.
  std::mt19937 rng(o.seed);
  std::vector<SampleTriple> samples;
  for (int64_t epoch = 0; epoch < o.max_epochs; ++epoch) {
    if (int64_t(samples.size()) >= o.num_samples) break;
    for (int64_t doc = doc_begin; doc < doc_end; ++doc) {
      const int64_t first = data.document_index(doc), last = data.document_index(doc + 1);
      int64_t remain = last - first;
      if (remain < o.min_sentences) continue;
      if (remain > 1) {
        bool has_long = false;
        for (int64_t s = first; s < last && !has_long; ++s) has_long = data.sequence_length(s) > kLongSentenceLen;
        if (has_long) continue;
      }
      int64_t start = first, acc = 0, count = 0;
      int32_t target = target_length(ratio, o.max_len, rng);
      for (int64_t s = first; s < last; ++s) {
        acc += data.sequence_length(s);
        ++count;
        --remain;
        if ((acc >= target && remain > 1 && count >= o.min_sentences) || remain == 0) {
          samples.push_back({start, s + 1, target});
          start = s + 1;
          target = target_length(ratio, o.max_len, rng);
          acc = 0;
          count = 0;
        }
      }
    }
    KILN_CHECK(!samples.empty(),
               "{}: no samples: every document has fewer than {} sentences or a sentence over {} tokens{}", what,
               o.min_sentences, kLongSentenceLen,
               o.min_sentences > 1 ? " (prepare with --split-sentences, or train with --bert-no-binary-head)" : "");
  }
  std::mt19937_64 shuffle_rng(uint64_t(o.seed) + 1);
  for (int64_t i = int64_t(samples.size()) - 1; i > 0; --i) {
    const int64_t j = int64_t(shuffle_rng() % uint64_t(i + 1));
    std::swap(samples[size_t(i)], samples[size_t(j)]);
  }
  return samples;
}

std::vector<std::pair<int16_t, int64_t>> build_blending_index(const std::vector<double>& weights, int64_t size) {
  std::vector<std::pair<int16_t, int64_t>> index(size_t(std::max<int64_t>(size, 0)));
  std::vector<int64_t> counts(weights.size(), 0);
  for (int64_t k = 0; k < size; ++k) {
    const double kd = std::max(double(k), 1.0);
    size_t best = 0;
    double best_error = weights[0] * kd - double(counts[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * kd - double(counts[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    index[size_t(k)] = {int16_t(best), counts[best]++};
  }
  return index;
}

}  // namespace kiln::data::megatron
