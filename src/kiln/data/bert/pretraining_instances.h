// data/bert/pretraining_instances.h — Google's create_pretraining_data: sentence-pair
// instances with next-sentence labels and masked-LM predictions, from tokenized documents.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/data/bert/bert_sample.h"
#include "kiln/data/text/vocab.h"

namespace kiln::data {

using Segment = std::vector<int32_t>;   // the ids of one input line
using Document = std::vector<Segment>;  // non-empty segments of one document

struct InstanceOptions {
  int max_seq_length = 512;
  int max_predictions = 76;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  int dupe_factor = 10;
  bool whole_word_masking = false;
};

// Throws kiln::Error naming the bad option.
void validate(const InstanceOptions& options);

// The functions below draw from Rng = PartRng (kiln's Philox streams) or PythonRandom (the
// reference's CPython generator) in the reference's order: random(), randint(a, b) with both
// ends inclusive, and shuffle().

// Instances built from *documents[index]; random next sentences come from the other documents.
template <typename Rng>
void create_instances_from_document(const std::vector<const Document*>& documents, size_t index,
                                    const Vocab& vocab, const InstanceOptions& options,
                                    Rng& rng, std::vector<BertSample>& out);

// Masks sample.input_ids in place and fills masked_positions / masked_ids (sorted by position).
template <typename Rng>
void create_masked_lm_predictions(BertSample& sample, const Vocab& vocab,
                                  const InstanceOptions& options, Rng& rng);

// The whole per-part procedure: shuffle documents, dupe_factor passes, shuffle instances.
// Hands each instance to `emit` as it is made and returns the final shuffle as an order:
// output position i holds the order[i]-th instance emitted (the shuffle's draws depend only on
// the count, so shuffling indices draws what shuffling the instances does).
using InstanceSink = std::function<void(BertSample&&)>;
template <typename Rng>
std::vector<uint32_t> create_instances(const std::vector<Document>& documents, const Vocab& vocab,
                                       const InstanceOptions& options, Rng& rng, const InstanceSink& emit);

// The same, with the instances gathered in output order.
template <typename Rng>
std::vector<BertSample> create_instances(const std::vector<Document>& documents, const Vocab& vocab,
                                         const InstanceOptions& options, Rng& rng);

}  // namespace kiln::data
