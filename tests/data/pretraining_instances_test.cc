#include "kiln/data/bert/pretraining_instances.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data_test_util.h"
#include "kiln/data/bert/part_rng.h"
#include "kiln/data/bert/text_documents.h"
#include "kiln/data/text/bert_tokenizer.h"

namespace kiln::data {
namespace {

struct Corpus {
  BertTokenizer tokenizer{Vocab::load(testing::test_vocab())};
  std::vector<Document> documents;
  std::vector<std::vector<int32_t>> flat;  // each document's tokens, concatenated
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    const std::string text = testing::sotu_sentences(120000, 10);
    for (const auto& span : scan_documents(text, 0)) {
      Document d = tokenize_document(std::string_view(text).substr(span.begin, span.end - span.begin), c.tokenizer);
      if (d.empty()) continue;
      std::vector<int32_t> flat;
      for (const auto& s : d) flat.insert(flat.end(), s.begin(), s.end());
      c.flat.push_back(std::move(flat));
      c.documents.push_back(std::move(d));
    }
    return c;
  }();
  return c;
}

// Index of a document containing `run` contiguously at or after `from` (-1 if none).
int find_document(const std::vector<int32_t>& run, int only = -1) {
  const auto& flat = corpus().flat;
  for (int d = 0; d < int(flat.size()); ++d) {
    if (only >= 0 && d != only) continue;
    if (std::search(flat[size_t(d)].begin(), flat[size_t(d)].end(), run.begin(), run.end()) != flat[size_t(d)].end())
      return d;
  }
  return -1;
}

std::vector<int32_t> unmask(const BertSample& s) {
  std::vector<int32_t> original = s.input_ids;
  for (size_t k = 0; k < s.masked_positions.size(); ++k) original[size_t(s.masked_positions[k])] = s.masked_ids[k];
  return original;
}

TEST(PretrainingInstances, EverySampleSatisfiesTheFormatInvariants) {
  const Corpus& c = corpus();
  const Vocab& v = c.tokenizer.vocab();
  ASSERT_GT(c.documents.size(), 20u);
  InstanceOptions o;
  o.max_seq_length = 128;
  o.max_predictions = 20;
  o.dupe_factor = 3;
  PartRng rng(12345, 1);
  const auto samples = create_instances(c.documents, v, o, rng);
  ASSERT_GT(samples.size(), 500u);

  int64_t predictions = 0, masks = 0, kept = 0, random_next = 0, short_samples = 0;
  for (const BertSample& s : samples) {
    const std::vector<int32_t> t = unmask(s);
    const size_t len = t.size();
    ASSERT_LE(len, size_t(o.max_seq_length));
    ASSERT_EQ(s.segment_ids.size(), len);
    ASSERT_EQ(t.front(), v.cls_id());
    ASSERT_EQ(t.back(), v.sep_id());
    ASSERT_EQ(std::count(t.begin(), t.end(), v.sep_id()), 2);
    ASSERT_EQ(std::count(t.begin(), t.end(), v.cls_id()), 1);
    const size_t sep = size_t(std::find(t.begin(), t.end(), v.sep_id()) - t.begin());
    ASSERT_GE(sep, 2u);            // A is not empty
    ASSERT_LE(sep + 2, len - 1);   // B is not empty
    for (size_t i = 0; i < len; ++i) ASSERT_EQ(s.segment_ids[i], i <= sep ? 0 : 1) << i;

    const size_t n = std::min<size_t>(size_t(o.max_predictions),
                                      std::max<size_t>(1, size_t(std::nearbyint(double(len) * 0.15))));
    ASSERT_EQ(s.masked_positions.size(), n);
    ASSERT_EQ(s.masked_ids.size(), n);
    for (size_t k = 0; k < n; ++k) {
      const auto pos = size_t(s.masked_positions[k]);
      ASSERT_TRUE(k == 0 || s.masked_positions[k - 1] < s.masked_positions[k]);
      ASSERT_TRUE(pos > 0 && pos < len && pos != sep);
      masks += s.input_ids[pos] == v.mask_id();
      kept += s.input_ids[pos] == t[pos];
    }
    // Unmasked tokens are untouched: only predicted positions differ from the original.
    for (size_t i = 0; i < len; ++i)
      ASSERT_TRUE(std::binary_search(s.masked_positions.begin(), s.masked_positions.end(), int32_t(i)) ||
                  s.input_ids[i] == t[i]) << i;
    predictions += int64_t(n);

    // A and B are contiguous runs of real documents; a true next B follows A in A's document.
    const std::vector<int32_t> a(t.begin() + 1, t.begin() + long(sep));
    const std::vector<int32_t> b(t.begin() + long(sep) + 1, t.end() - 1);
    const int doc_a = find_document(a);
    ASSERT_GE(doc_a, 0);
    if (s.next_sentence_label == 0) {
      const auto& flat = c.flat[size_t(doc_a)];
      const auto at = std::search(flat.begin(), flat.end(), a.begin(), a.end());
      ASSERT_NE(std::search(at + long(a.size()), flat.end(), b.begin(), b.end()), flat.end());
    } else {
      ASSERT_GE(find_document(b), 0);
      ++random_next;
    }
    short_samples += len < 64;
  }
  // 80% [MASK], 10% kept, 10% random (a random id rarely equals the original or [MASK]).
  EXPECT_NEAR(double(masks) / double(predictions), 0.8, 0.03);
  EXPECT_NEAR(double(kept) / double(predictions), 0.1, 0.025);
  const double nsp = double(random_next) / double(samples.size());
  EXPECT_GT(nsp, 0.4);
  EXPECT_LT(nsp, 0.7);
  EXPECT_GT(short_samples, 0);
}

TEST(PretrainingInstances, SameSeedSameInstancesOtherSeedOthers) {
  const Corpus& c = corpus();
  InstanceOptions o;
  o.max_seq_length = 64;
  o.max_predictions = 10;
  o.dupe_factor = 1;
  PartRng r1(7, 3), r2(7, 3), r3(8, 3);
  const auto s1 = create_instances(c.documents, c.tokenizer.vocab(), o, r1);
  const auto s2 = create_instances(c.documents, c.tokenizer.vocab(), o, r2);
  const auto s3 = create_instances(c.documents, c.tokenizer.vocab(), o, r3);
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) {
    EXPECT_EQ(s1[i].input_ids, s2[i].input_ids);
    EXPECT_EQ(s1[i].masked_positions, s2[i].masked_positions);
  }
  EXPECT_FALSE(s1.size() == s3.size() && s1[0].input_ids == s3[0].input_ids);
}

TEST(PretrainingInstances, WholeWordMaskingMasksEveryPieceOfAWord) {
  const Corpus& c = corpus();
  const Vocab& v = c.tokenizer.vocab();
  InstanceOptions o;
  o.max_seq_length = 128;
  o.max_predictions = 20;
  o.dupe_factor = 1;
  o.whole_word_masking = true;
  PartRng rng(1, 2);
  const auto samples = create_instances(c.documents, v, o, rng);
  int64_t continuation_masked = 0;
  for (const BertSample& s : samples) {
    const std::vector<int32_t> t = unmask(s);
    const auto masked = [&](size_t i) {
      return std::binary_search(s.masked_positions.begin(), s.masked_positions.end(), int32_t(i));
    };
    const size_t n = std::min<size_t>(20, std::max<size_t>(1, size_t(std::nearbyint(double(t.size()) * 0.15))));
    ASSERT_LE(s.masked_positions.size(), n);
    ASSERT_GE(s.masked_positions.size(), 1u);
    for (size_t i = 1; i + 1 < t.size(); ++i) {
      if (!v.is_continuation(t[i]) || t[i - 1] == v.sep_id() || t[i - 1] == v.cls_id()) continue;
      ASSERT_EQ(masked(i), masked(i - 1)) << "a word was masked partially at " << i;
      continuation_masked += masked(i);
    }
  }
  EXPECT_GT(continuation_masked, 0);
}

TEST(PretrainingInstances, MaskingKeepsOriginalsAsLabels) {
  const Vocab& v = corpus().tokenizer.vocab();
  InstanceOptions o;
  o.max_predictions = 76;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    BertSample s;
    s.input_ids = {v.cls_id()};
    for (int i = 0; i < 40; ++i) s.input_ids.push_back(2000 + i);
    s.input_ids.push_back(v.sep_id());
    s.input_ids.push_back(3000);
    s.input_ids.push_back(v.sep_id());
    const std::vector<int32_t> original = s.input_ids;
    PartRng rng(seed, 0);
    create_masked_lm_predictions(s, v, o, rng);
    ASSERT_EQ(s.masked_positions.size(), 7u);  // round(44 * 0.15)
    for (size_t k = 0; k < 7; ++k) {
      const auto pos = size_t(s.masked_positions[k]);
      ASSERT_TRUE(pos != 0 && pos != 41 && pos != 43);
      ASSERT_EQ(s.masked_ids[k], original[pos]);
      ASSERT_TRUE(k == 0 || s.masked_positions[k - 1] < s.masked_positions[k]);
    }
    for (size_t i = 0; i < original.size(); ++i)
      ASSERT_TRUE(std::binary_search(s.masked_positions.begin(), s.masked_positions.end(), int32_t(i)) ||
                  s.input_ids[i] == original[i]) << i;
  }
}

}  // namespace
}  // namespace kiln::data
