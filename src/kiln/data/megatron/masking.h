// data/megatron/masking.h — Megatron's _create_masked_lm_predictions with BERT's settings:
// whole-word n-gram masking (n <= 3, P(n) proportional to 1/n) and the 80/10/10 rule, drawing
// from numpy's legacy RandomState exactly as Megatron does (specs/megatron-bert.md §1.8).
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/data/megatron/numpy_random.h"
#include "kiln/data/text/vocab.h"

namespace kiln::data::megatron {

inline constexpr int kMaxNgram = 3;

// The cap on predictions for a sample: mask_prob * target, and max(1, round(mask_prob * len))
// (round half to even); a real number, as in Megatron.
double masked_lm_cap(double mask_prob, int32_t target, size_t num_tokens);

// Largest number of predictions any sample of `seq_length` can get: floor(p * (seq_length - 3)),
// at least 1 (the P dimension of BertBatch).
int max_masked_predictions(double mask_prob, int seq_length);

// What the n-gram draws did, for tests: n drawn per candidate tried, n (words) of each n-gram masked.
struct MaskingTrace {
  std::vector<int> drawn_n, accepted_n;
};

// Masks `tokens` ([CLS] A [SEP] B [SEP]) in place. [CLS]/[SEP] are never candidates; a "##"
// token joins the previous candidate word (even across [SEP], as in Megatron). Returns the
// masked positions ascending in `positions` and their original ids in `labels`.
void create_masked_lm_predictions(std::vector<int32_t>& tokens, int32_t target, double mask_prob,
                                  const Vocab& vocab, NumpyRandomState& rng, std::vector<int32_t>& positions,
                                  std::vector<int32_t>& labels, MaskingTrace* trace = nullptr);

}  // namespace kiln::data::megatron
