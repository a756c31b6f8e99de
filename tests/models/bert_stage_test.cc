// models/bert_stage.h: two pipeline stages run one after the other in one process compute what
// the whole BertForPretraining computes (losses, every gradient, the tied word embedding's as the
// sum of the two stages' copies), dropout on; and stage instances over one ParamStore hold one
// micro-batch each, interleaved in the 1F1B order, with the gradients of sequential runs; backward
// tells Step::grad_watch which gradients are final after the heads and after each layer.
#include "kiln/models/bert_stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/philox.h"
#include "kiln/models/bert.h"

namespace kiln::models {
namespace {

BertConfig config(bool pre_ln) {
  BertConfig c;
  c.vocab_size = 64;
  c.hidden = 16;
  c.layers = 4;
  c.heads = 2;
  c.intermediate = 32;
  c.max_position = 16;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  c.init_std = 0.2f;
  c.pre_ln = pre_ln;
  return c;
}

data::BertBatch batch(uint64_t seed, int rows = 2, int S = 12, int P = 3) {
  const RngStream rng{seed, rng_stream(RngPurpose::test, 0, 0)};
  uint64_t k = 0;
  data::BertBatch b;
  b.batch = rows, b.seq_len = S, b.max_pred = P;
  for (int r = 0; r < rows; ++r) {
    for (int s = 0; s < S; ++s) {
      b.input_ids.push_back(int32_t(1 + rng.below(k++, 63)));
      b.segment_ids.push_back(s >= S / 2);
      b.input_mask.push_back(s < S - r);
    }
    for (int p = 0; p < P; ++p) {
      b.masked_positions.push_back(1 + 2 * p);
      b.masked_ids.push_back(int32_t(rng.below(k++, 64)));
      b.masked_weights.push_back(1.0f);
    }
    b.nsp_labels.push_back(int32_t(rng.below(k++, 2)));
  }
  return b;
}

Step train_step(uint64_t offset) {
  Step s{7, 0, true};
  s.sample_offset = offset;
  return s;
}

std::vector<float> grad(const ParamStore& store, const std::string& name) {
  const ParamSpec* s = store.find(name);
  EXPECT_TRUE(s) << name;
  if (!s) return {};
  return {store.host_grads().begin() + s->offset, store.host_grads().begin() + s->offset + s->numel};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double d = 0, r = 0;
  for (size_t i = 0; i < got.size(); ++i) d += std::pow(double(got[i]) - want[i], 2), r += double(want[i]) * want[i];
  EXPECT_LE(std::sqrt(d), 1e-5 * std::sqrt(r) + 1e-12) << what;
}

TEST(BertStage, LayersSplitEvenly) {
  const StageRange r = bert_stage_range(config(false), 1, 2);
  EXPECT_EQ(r.first_layer, 2);
  EXPECT_EQ(r.end_layer, 4);
  EXPECT_FALSE(r.first);
  EXPECT_TRUE(r.last);
  EXPECT_THROW(bert_stage_range(config(false), 0, 3), Error);
}

TEST(BertStage, TwoStagesComputeTheWholeModel) {
  for (bool pre_ln : {false, true}) {
    const BertConfig c = config(pre_ln);
    ParamStore whole_store, first_store, last_store;
    BertForPretraining whole(c, whole_store);
    BertStage first(c, bert_stage_range(c, 0, 2), first_store), last(c, bert_stage_range(c, 1, 2), last_store);
    first_store.allocate();
    last_store.allocate();
    for (ParamStore* s : {&whole_store, &first_store, &last_store}) init_bert_weights(*s, 3, c.init_std);
    EXPECT_EQ(first_store.specs().size() + last_store.specs().size(), whole_store.specs().size() + 1);
    EXPECT_FALSE(last_store.find("bert.embeddings.word_embeddings.weight")->norm_owner);

    const data::BertBatch b = batch(1);
    const Step step = train_step(4);
    const BertOutputs want = whole.forward(step, b);
    whole.backward(step, 0.5f);
    BertOutputs got;
    const Tensor y = first.forward(step, b, {}, nullptr);
    Tensor input = last.input_buffer(step, y.shape[0]);
    std::copy_n(y.ptr<float>(), y.numel(), input.ptr<float>());
    EXPECT_FALSE(last.forward(step, b, input, &got).defined());
    EXPECT_EQ(got.loss, want.loss) << "pre_ln " << pre_ln;
    EXPECT_EQ(got.mlm_correct, want.mlm_correct);
    const Tensor dx = last.backward(step, {}, 0.5f);
    EXPECT_FALSE(first.backward(step, dx, 0.5f).defined());

    for (const ParamStore* stage : {&first_store, &last_store})
      for (const ParamSpec& s : stage->specs()) {
        if (s.name == "bert.embeddings.word_embeddings.weight" ||
            s.name.find("attention.self.key.bias") != std::string::npos)
          continue;
        expect_close(grad(*stage, s.name), grad(whole_store, s.name), s.name);
      }
    std::vector<float> tied = grad(first_store, "bert.embeddings.word_embeddings.weight");
    const std::vector<float> decoder = grad(last_store, "bert.embeddings.word_embeddings.weight");
    for (size_t i = 0; i < tied.size(); ++i) tied[i] += decoder[i];
    expect_close(tied, grad(whole_store, "bert.embeddings.word_embeddings.weight"), "tied word embedding");
  }
}

TEST(BertStage, InstancesOverOneStoreHoldOneMicroBatchEach) {
  const BertConfig c = config(true);
  const StageRange whole{0, c.layers, true, true};
  ParamStore sequential_store, shared_store;
  BertStage sequential(c, whole, sequential_store);
  sequential_store.allocate();
  shared_store.share_existing(true);
  BertStage a(c, whole, shared_store), b(c, whole, shared_store);
  shared_store.share_existing(false);
  shared_store.allocate();
  EXPECT_EQ(shared_store.size(), sequential_store.size());
  init_bert_weights(sequential_store, 5, c.init_std);
  init_bert_weights(shared_store, 5, c.init_std);
  const data::BertBatch b0 = batch(1), b1 = batch(2);
  BertOutputs o;
  sequential.forward(train_step(0), b0, {}, &o);
  sequential.backward(train_step(0), {}, 0.5f);
  sequential.forward(train_step(2), b1, {}, &o);
  sequential.backward(train_step(2), {}, 0.5f);
  a.forward(train_step(0), b0, {}, &o);
  b.forward(train_step(2), b1, {}, &o);  // two micro-batches in flight
  a.backward(train_step(0), {}, 0.5f);
  b.backward(train_step(2), {}, 0.5f);
  EXPECT_EQ(shared_store.grads_vector(), sequential_store.grads_vector());

  ParamStore store;
  BertStage once(c, whole, store);
  EXPECT_THROW(BertStage(c, whole, store), Error);  // a second registration without share_existing
}

// Records what a backward says is final (core/step.h).
struct FinalOffsets final : GradientWatch {
  std::vector<int64_t> offsets;
  void final_from(int64_t offset) override { offsets.push_back(offset); }
};

int64_t offset_of(const ParamStore& store, const std::string& name) { return store.find(name)->offset; }

// The whole model says, after the heads and after each layer, from where on the gradients are
// final; a pipeline stage says the same of its own parameters, in every instance.
TEST(BertStage, BackwardSaysAfterTheHeadsAndEachLayerWhichGradientsAreFinal) {
  for (bool pre_ln : {false, true}) {
    const BertConfig c = config(pre_ln);
    const std::string heads = pre_ln ? "bert.encoder.LayerNorm.weight" : "bert.pooler.dense.weight";
    auto layer = [](int n) { return "bert.encoder.layer." + std::to_string(n) + ".attention.self.query.weight"; };
    ParamStore store;
    BertForPretraining whole(c, store);
    init_bert_weights(store, 3, c.init_std);
    FinalOffsets watch;
    Step step = train_step(0);
    step.grad_watch = &watch;
    whole.forward(step, batch(1));
    whole.backward(step, 1.0f);
    EXPECT_EQ(watch.offsets, std::vector<int64_t>({offset_of(store, heads), offset_of(store, layer(3)),
                                                   offset_of(store, layer(2)), offset_of(store, layer(1)),
                                                   offset_of(store, layer(0))}));

    ParamStore last_store;
    last_store.share_existing(true);
    BertStage a(c, bert_stage_range(c, 1, 2), last_store), b(c, bert_stage_range(c, 1, 2), last_store);
    last_store.share_existing(false);
    last_store.allocate();
    init_bert_weights(last_store, 3, c.init_std);
    const std::vector<int64_t> want = {offset_of(last_store, heads), offset_of(last_store, layer(3)),
                                       offset_of(last_store, layer(2))};
    EXPECT_GT(want[0], want[1]) << "the heads come after the layers";
    EXPECT_LT(offset_of(last_store, "bert.embeddings.word_embeddings.weight"), want.back())
        << "no notification may cover the decoder's copy: the embedding group sums it after backward";
    for (BertStage* instance : {&a, &b}) {
      FinalOffsets stage_watch;
      step.grad_watch = &stage_watch;
      Tensor input = instance->input_buffer(step, 12);
      for (int64_t i = 0; i < input.numel(); ++i) input.ptr<float>()[i] = 0.01f * float(i % 17);
      BertOutputs out;
      instance->forward(step, batch(1, 1), input, &out);
      instance->backward(step, {}, 1.0f);
      EXPECT_EQ(stage_watch.offsets, want);
    }
  }
}

}  // namespace
}  // namespace kiln::models
