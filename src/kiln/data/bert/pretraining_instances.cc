#include "kiln/data/bert/pretraining_instances.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/core/error.h"
#include "kiln/data/bert/part_rng.h"
#include "kiln/data/bert/python_random.h"

namespace kiln::data {
namespace {

// Trims the longer side, from the front or the back with p = 0.5, until the pair fits.
template <typename Rng>
void truncate_seq_pair(Segment& a, Segment& b, size_t max_tokens, Rng& rng) {
  while (a.size() + b.size() > max_tokens) {
    Segment& longer = a.size() > b.size() ? a : b;
    if (rng.random() < 0.5) {
      longer.erase(longer.begin());
    } else {
      longer.pop_back();
    }
  }
}

}  // namespace

void validate(const InstanceOptions& o) {
  KILN_CHECK(o.max_seq_length >= 5 && o.max_seq_length <= 65535,
             "max_seq_length {} must be in [5, 65535]", o.max_seq_length);
  KILN_CHECK(o.max_predictions >= 1 && o.max_predictions <= o.max_seq_length,
             "max_predictions {} must be in [1, max_seq_length]", o.max_predictions);
  KILN_CHECK(o.masked_lm_prob > 0 && o.masked_lm_prob <= 1, "masked_lm_prob {} must be in (0, 1]",
             o.masked_lm_prob);
  KILN_CHECK(o.short_seq_prob >= 0 && o.short_seq_prob <= 1, "short_seq_prob {} must be in [0, 1]",
             o.short_seq_prob);
  KILN_CHECK(o.dupe_factor >= 1, "dupe_factor {} must be at least 1", o.dupe_factor);
}

template <typename Rng>
void create_masked_lm_predictions(BertSample& sample, const Vocab& vocab,
                                  const InstanceOptions& options, Rng& rng) {
  std::vector<int32_t>& tokens = sample.input_ids;
  // Candidate groups of positions, as [begin, end) ranges of `positions` (flat, since a vector
  // per token made this the hot spot); with whole-word masking "##" pieces join their word.
  std::vector<int32_t> positions;
  std::vector<std::pair<uint32_t, uint32_t>> groups;
  positions.reserve(tokens.size());
  groups.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t == vocab.cls_id() || t == vocab.sep_id()) continue;
    positions.push_back(int32_t(i));
    if (options.whole_word_masking && !groups.empty() && vocab.is_continuation(t)) {
      ++groups.back().second;
    } else {
      groups.emplace_back(uint32_t(positions.size() - 1), uint32_t(positions.size()));
    }
  }
  rng.shuffle(groups);

  const size_t num_to_predict = size_t(std::min<double>(
      options.max_predictions,
      std::max(1.0, std::nearbyint(double(tokens.size()) * options.masked_lm_prob))));
  std::vector<std::pair<int32_t, int32_t>> masked;  // (position, original id)
  masked.reserve(num_to_predict);
  for (const auto& [begin, end] : groups) {
    if (masked.size() >= num_to_predict) break;
    if (masked.size() + (end - begin) > num_to_predict) continue;
    for (uint32_t k = begin; k < end; ++k) {
      const int32_t pos = positions[k];  // each position is masked once, so tokens[pos] is the original
      masked.emplace_back(pos, tokens[size_t(pos)]);
      if (rng.random() < 0.8) {
        tokens[size_t(pos)] = vocab.mask_id();
      } else if (rng.random() >= 0.5) {  // else the original stays
        tokens[size_t(pos)] = int32_t(rng.randint(0, vocab.size() - 1));
      }
    }
  }
  std::sort(masked.begin(), masked.end());
  sample.masked_positions.clear();
  sample.masked_ids.clear();
  for (const auto& [pos, id] : masked) {
    sample.masked_positions.push_back(pos);
    sample.masked_ids.push_back(id);
  }
}

template <typename Rng>
void create_instances_from_document(const std::vector<const Document*>& documents, size_t index,
                                    const Vocab& vocab, const InstanceOptions& options,
                                    Rng& rng, std::vector<BertSample>& out) {
  const Document& document = *documents[index];
  const int64_t max_tokens = options.max_seq_length - 3;  // [CLS], [SEP], [SEP]
  int64_t target_length = max_tokens;
  if (rng.random() < options.short_seq_prob) target_length = rng.randint(2, max_tokens);

  std::vector<const Segment*> chunk;
  int64_t chunk_length = 0;
  for (int64_t i = 0; i < int64_t(document.size()); ++i) {
    chunk.push_back(&document[size_t(i)]);
    chunk_length += int64_t(document[size_t(i)].size());
    if (i != int64_t(document.size()) - 1 && chunk_length < target_length) continue;

    const int64_t nseg = int64_t(chunk.size());
    const int64_t a_end = nseg >= 2 ? rng.randint(1, nseg - 1) : 1;
    Segment a, b;
    for (int64_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[size_t(j)]->begin(), chunk[size_t(j)]->end());
    bool random_next = false;
    if (nseg == 1 || rng.random() < 0.5) {
      random_next = true;
      const int64_t target_b = target_length - int64_t(a.size());
      size_t other = index;
      for (int tries = 0; tries < 10; ++tries) {
        other = size_t(rng.randint(0, int64_t(documents.size()) - 1));
        if (other != index) break;
      }
      const Document& random_doc = *documents[other];
      for (size_t j = size_t(rng.randint(0, int64_t(random_doc.size()) - 1)); j < random_doc.size(); ++j) {
        b.insert(b.end(), random_doc[j].begin(), random_doc[j].end());
        if (int64_t(b.size()) >= target_b) break;
      }
      i -= nseg - a_end;  // the unused segments are put back for the next chunk
    } else {
      for (int64_t j = a_end; j < nseg; ++j) b.insert(b.end(), chunk[size_t(j)]->begin(), chunk[size_t(j)]->end());
    }
    truncate_seq_pair(a, b, size_t(max_tokens), rng);

    BertSample sample;
    sample.input_ids.reserve(a.size() + b.size() + 3);
    sample.input_ids.push_back(vocab.cls_id());
    sample.input_ids.insert(sample.input_ids.end(), a.begin(), a.end());
    sample.input_ids.push_back(vocab.sep_id());
    sample.segment_ids.assign(sample.input_ids.size(), 0);
    sample.input_ids.insert(sample.input_ids.end(), b.begin(), b.end());
    sample.input_ids.push_back(vocab.sep_id());
    sample.segment_ids.resize(sample.input_ids.size(), 1);
    sample.next_sentence_label = random_next ? 1 : 0;
    create_masked_lm_predictions(sample, vocab, options, rng);
    out.push_back(std::move(sample));

    chunk.clear();
    chunk_length = 0;
  }
}

template <typename Rng>
std::vector<uint32_t> create_instances(const std::vector<Document>& part, const Vocab& vocab,
                                       const InstanceOptions& options, Rng& rng, const InstanceSink& emit) {
  std::vector<const Document*> documents;  // shuffled in place of the documents themselves
  for (const Document& d : part)
    if (!d.empty()) documents.push_back(&d);
  rng.shuffle(documents);
  std::vector<BertSample> made;
  uint32_t count = 0;
  for (int pass = 0; pass < options.dupe_factor; ++pass) {
    for (size_t i = 0; i < documents.size(); ++i) {
      create_instances_from_document(documents, i, vocab, options, rng, made);
      for (BertSample& s : made) emit(std::move(s));
      count += uint32_t(made.size());
      made.clear();
    }
  }
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  rng.shuffle(order);
  return order;
}

template <typename Rng>
std::vector<BertSample> create_instances(const std::vector<Document>& documents, const Vocab& vocab,
                                         const InstanceOptions& options, Rng& rng) {
  std::vector<BertSample> made, out;
  const std::vector<uint32_t> order = create_instances(documents, vocab, options, rng,
                                                       [&](BertSample&& s) { made.push_back(std::move(s)); });
  out.reserve(order.size());
  for (const uint32_t i : order) out.push_back(std::move(made[i]));
  return out;
}

template void create_instances_from_document(const std::vector<const Document*>&, size_t, const Vocab&,
                                             const InstanceOptions&, PartRng&, std::vector<BertSample>&);
template void create_instances_from_document(const std::vector<const Document*>&, size_t, const Vocab&,
                                             const InstanceOptions&, PythonRandom&, std::vector<BertSample>&);
template void create_masked_lm_predictions(BertSample&, const Vocab&, const InstanceOptions&, PartRng&);
template void create_masked_lm_predictions(BertSample&, const Vocab&, const InstanceOptions&, PythonRandom&);
template std::vector<uint32_t> create_instances(const std::vector<Document>&, const Vocab&, const InstanceOptions&,
                                                PartRng&, const InstanceSink&);
template std::vector<uint32_t> create_instances(const std::vector<Document>&, const Vocab&, const InstanceOptions&,
                                                PythonRandom&, const InstanceSink&);
template std::vector<BertSample> create_instances(const std::vector<Document>&, const Vocab&, const InstanceOptions&,
                                                  PartRng&);

}  // namespace kiln::data
