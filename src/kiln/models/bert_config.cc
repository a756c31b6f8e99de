#include "kiln/models/bert_config.h"

#include <algorithm>
#include <string>

#include "kiln/core/error.h"
#include "kiln/core/init.h"

namespace kiln::models {

void check_bert_batch(const data::BertBatch& b, const BertConfig& c) {
  KILN_CHECK(b.batch > 0 && b.seq_len > 0 && b.max_pred > 0,
             "BERT batch: batch {}, seq_len {}, max_pred {} must all be positive", b.batch,
             b.seq_len, b.max_pred);
  KILN_CHECK(b.seq_len <= c.max_position,
             "BERT batch: seq_len {} exceeds the model's max_position {}", b.seq_len,
             c.max_position);
  const size_t BS = size_t(b.batch) * b.seq_len, BP = size_t(b.batch) * b.max_pred;
  KILN_CHECK(b.input_ids.size() == BS && b.segment_ids.size() == BS && b.input_mask.size() == BS,
             "BERT batch: input_ids/segment_ids/input_mask have {}/{}/{} entries, expected {}",
             b.input_ids.size(), b.segment_ids.size(), b.input_mask.size(), BS);
  KILN_CHECK(b.masked_positions.size() == BP && b.masked_ids.size() == BP &&
                 b.masked_weights.size() == BP,
             "BERT batch: masked_positions/ids/weights have {}/{}/{} entries, expected {}",
             b.masked_positions.size(), b.masked_ids.size(), b.masked_weights.size(), BP);
  KILN_CHECK(b.nsp_labels.size() == size_t(b.batch),
             "BERT batch: nsp_labels has {} entries, expected {}", b.nsp_labels.size(), b.batch);
  for (size_t i = 0; i < BP; ++i)
    KILN_CHECK(b.masked_positions[i] >= 0 && b.masked_positions[i] < b.seq_len,
               "BERT batch: masked position {} (row {}) outside [0, {})", b.masked_positions[i],
               i / b.max_pred, b.seq_len);
  // The embedding gathers do not check ids: this is where they are validated.
  for (size_t i = 0; i < BS; ++i) {
    KILN_CHECK(b.input_ids[i] >= 0 && b.input_ids[i] < c.vocab_size,
               "BERT batch: input id {} at position {} is outside the vocabulary [0, {})",
               b.input_ids[i], i, c.vocab_size);
    KILN_CHECK(b.segment_ids[i] >= 0 && b.segment_ids[i] < c.type_vocab,
               "BERT batch: segment id {} at position {} is outside [0, {})", b.segment_ids[i],
               i, c.type_vocab);
  }
}

namespace {

// Element e of a parameter part: its index in the whole parameter (row-major).
uint64_t whole_index(const ParamSpec& s, int64_t e) {
  if (s.part_dim < 0) return uint64_t(e);
  int64_t inner = 1;  // elements per entry of part_dim
  for (size_t d = size_t(s.part_dim) + 1; d < s.shape.size(); ++d) inner *= s.shape[d];
  const int64_t outer = e / (s.shape[size_t(s.part_dim)] * inner), rest = e % (s.shape[size_t(s.part_dim)] * inner);
  return uint64_t((outer * s.full_shape[size_t(s.part_dim)] + s.part_start) * inner + rest);
}

}  // namespace

void init_bert_weights(ParamStore& store, uint64_t seed, float init_std) {
  for (const ParamSpec& s : store.specs()) {
    float* w = store.values.ptr<float>() + s.offset;
    const bool is_norm_weight = s.name.find("LayerNorm.weight") != std::string::npos;
    if (!s.decay) {
      std::fill(w, w + s.numel, is_norm_weight ? 1.0f : 0.0f);
      continue;
    }
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < s.numel; ++e) w[e] = init_std * truncated_normal(seed, s.name, whole_index(s, e));
  }
}

RecomputeLayout recompute_layout(const BertConfig& config, int64_t layers) {
  RecomputeLayout r;
  r.storage_of.resize(size_t(layers));
  for (int64_t n = 0; n < layers; ++n) r.storage_of[size_t(n)] = n;
  r.copies_input.assign(size_t(layers), false);
  const int64_t per = std::min(config.recompute_layers, layers);
  if (config.recompute == BertConfig::Recompute::uniform) {
    for (int64_t first = 0; first < layers; first += per) {
      r.groups.push_back({first, std::min(first + per, layers)});
      for (int64_t n = first; n < r.groups.back().end; ++n) r.storage_of[size_t(n)] = n - first;
      r.copies_input[size_t(first)] = first > 0;
    }
  }
  if (config.recompute == BertConfig::Recompute::block) {
    const int64_t owner = per < layers ? per : 0;
    for (int64_t n = 0; n < per; ++n) {
      r.groups.push_back({n, n + 1});
      r.storage_of[size_t(n)] = owner;
      r.copies_input[size_t(n)] = n > 0;
    }
    if (per < layers) r.copies_input[size_t(per)] = true;
  }
  return r;
}

int64_t bert_flops_per_sample(const BertConfig& config, int seq_len, int max_pred) {
  const int64_t H = config.hidden, I = config.intermediate, V = config.vocab_size,
                L = config.layers, S = seq_len, P = max_pred;
  const int64_t head = config.binary_head ? H * H + 2 * H : 0;
  return 6 * (S * L * (4 * H * H + 2 * H * I) + P * (H * H + H * V) + head) +
         12 * L * S * S * H;
}

}  // namespace kiln::models
