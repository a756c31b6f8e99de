#include "kiln/data/megatron/masking.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace kiln::data::megatron {

namespace {

// numpy: pvals = 1 / arange(1, 4); pvals /= pvals.sum(); then choice() normalises p again and
// takes cdf = cumsum(p) / cumsum(p)[-1]. The same operations, in the same order.
std::array<double, kMaxNgram> ngram_cdf() {
  std::array<double, kMaxNgram> p{};
  for (int n = 1; n <= kMaxNgram; ++n) p[size_t(n - 1)] = 1.0 / double(n);
  for (int pass = 0; pass < 2; ++pass) {
    const double sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& x : p) x /= sum;
  }
  std::array<double, kMaxNgram> cdf{};
  std::partial_sum(p.begin(), p.end(), cdf.begin());
  for (double& x : cdf) x /= cdf.back();
  return cdf;
}

}  // namespace

double masked_lm_cap(double mask_prob, int32_t target, size_t num_tokens) {
  const double by_length = std::max(1.0, std::nearbyint(double(num_tokens) * mask_prob));
  return std::min(mask_prob * double(target), by_length);
}

int max_masked_predictions(double mask_prob, int seq_length) {
  return std::max(1, int(std::floor(mask_prob * double(seq_length - 3))));
}

void create_masked_lm_predictions(std::vector<int32_t>& tokens, int32_t target, double mask_prob,
                                  const Vocab& vocab, NumpyRandomState& rng, std::vector<int32_t>& positions,
                                  std::vector<int32_t>& labels, MaskingTrace* trace) {
  static const std::array<double, kMaxNgram> cdf = ngram_cdf();
  positions.clear();
  labels.clear();

  // Candidate words: [start, end) ranges into `members` (token positions).
  std::vector<int32_t> members;
  std::vector<size_t> word_start;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t == vocab.cls_id() || t == vocab.sep_id()) continue;
    if (word_start.empty() || !vocab.is_continuation(t)) word_start.push_back(members.size());
    members.push_back(int32_t(i));
  }
  const size_t num_words = word_start.size();
  word_start.push_back(members.size());
  // Positions of the n-gram of words [c, c + n), truncated at the last word.
  auto ngram_size = [&](size_t c, size_t n) { return word_start[std::min(c + n, num_words)] - word_start[c]; };

  const double cap = masked_lm_cap(mask_prob, target, tokens.size());
  std::vector<int32_t> order(num_words);
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);

  std::vector<uint8_t> covered(tokens.size(), 0);
  const int32_t vocab_size = vocab.size();
  for (const int32_t c : order) {
    if (double(positions.size()) >= cap) break;
    size_t n = rng.choice(cdf) + 1;
    if (trace) trace->drawn_n.push_back(int(n));
    while (n > 1 && double(positions.size() + ngram_size(size_t(c), n)) > cap) --n;
    const size_t len = ngram_size(size_t(c), n);
    if (double(positions.size() + len) > cap) continue;
    const int32_t* span = members.data() + word_start[size_t(c)];
    if (std::any_of(span, span + len, [&](int32_t p) { return covered[size_t(p)] != 0; })) continue;
    if (trace) trace->accepted_n.push_back(int(std::min(n, num_words - size_t(c))));
    for (size_t k = 0; k < len; ++k) {
      const int32_t p = span[k];
      covered[size_t(p)] = 1;
      const int32_t original = tokens[size_t(p)];
      if (rng.random() < 0.8) {
        tokens[size_t(p)] = vocab.mask_id();
      } else if (rng.random() >= 0.5) {
        tokens[size_t(p)] = int32_t(rng.randint(0, vocab_size));
      }
      positions.push_back(p);
      labels.push_back(original);
    }
  }
  // Sort (position, label) pairs by position.
  std::vector<size_t> idx(positions.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return positions[a] < positions[b]; });
  std::vector<int32_t> sorted_pos(idx.size()), sorted_lab(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    sorted_pos[k] = positions[idx[k]];
    sorted_lab[k] = labels[idx[k]];
  }
  positions.swap(sorted_pos);
  labels.swap(sorted_lab);
}

}  // namespace kiln::data::megatron
