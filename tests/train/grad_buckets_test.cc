// Data-parallel gradient buckets (train/grad_buckets.h): where the buffer is cut, when each
// bucket starts, and that the models' Step::grads_final_from calls name only final gradients.
#include "kiln/train/grad_buckets.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kiln/core/philox.h"
#include "kiln/models/bert.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"
#include "tests/backend/random_fill.h"
#include "tests/testing/fake_communicator.h"

namespace kiln::train {
namespace {

// Records which flat ranges of `base` were started, in order.
class RecordingComm final : public testing::FakeCommunicator {
 public:
  explicit RecordingComm(const Tensor& base) : FakeCommunicator(2), base_(base.ptr<float>()) {}
  std::vector<std::pair<int64_t, int64_t>> started;  // (begin, end)
  std::unique_ptr<dist::Request> iall_reduce_sum(Tensor& t) override {
    const int64_t begin = t.ptr<float>() - base_;
    started.emplace_back(begin, begin + t.numel());
    return Communicator::iall_reduce_sum(t);
  }

 private:
  const float* base_;
};

TEST(GradBuckets, CutTheBufferAtParameterBoundariesFromItsEnd) {
  ParamStore store;
  store.add("a", {100}, true);  // offsets 0, 112, 160, 368 (16-aligned)
  store.add("b", {40}, true);
  store.add("c", {200}, true);
  store.add("d", {30}, true);
  store.allocate();
  RecordingComm comm(store.grads);
  GradBuckets buckets(comm, store, 150);
  using R = GradBuckets::Range;
  ASSERT_EQ(buckets.buckets().size(), 2u);
  EXPECT_EQ(buckets.buckets()[0].begin, 160);  // c and d: >= 150 elements
  EXPECT_EQ(buckets.buckets()[0].end, store.padded_size());
  EXPECT_EQ(buckets.buckets()[1].begin, 0);    // a and b: what is left
  EXPECT_EQ(buckets.buckets()[1].end, 160);
  GradBuckets one_each(comm, store, 1);
  std::vector<int64_t> begins;
  for (const R& r : one_each.buckets()) begins.push_back(r.begin);
  EXPECT_EQ(begins, (std::vector<int64_t>{368, 160, 112, 0}));
}

TEST(GradBuckets, StartEachBucketWhenItsGradientsAreFinalAndTheRestAtFinish) {
  ParamStore store;
  for (const char* name : {"a", "b", "c", "d"}) store.add(name, {32}, true);  // offsets 0, 32, 64, 96
  store.allocate();
  RecordingComm comm(store.grads);
  GradBuckets buckets(comm, store, 32);
  buckets.final_from(100);  // inside d: nothing whole yet
  EXPECT_TRUE(comm.started.empty());
  buckets.final_from(64);
  EXPECT_EQ(comm.started, (std::vector<std::pair<int64_t, int64_t>>{{96, 128}, {64, 96}}));
  EXPECT_EQ(buckets.started(), 2u);
  buckets.finish();
  EXPECT_EQ(comm.started.size(), 4u);
  EXPECT_EQ(comm.started.back(), (std::pair<int64_t, int64_t>{0, 32}));
  EXPECT_EQ(buckets.started(), 0u);  // ready for the next step
}

// Snapshots the gradients at every notification; after backward, checks that what was named
// final then did not change any more.
class FinalityCheck final : public GradientWatch {
 public:
  explicit FinalityCheck(const ParamStore& store) : store_(store) {}
  void final_from(int64_t offset) override { snapshots_.emplace_back(offset, store_.grads_vector()); }
  void expect_final(const char* model) const {
    ASSERT_FALSE(snapshots_.empty()) << model;
    const std::vector<float> last = store_.grads_vector();
    for (size_t i = 0; i < snapshots_.size(); ++i) {
      const auto& [offset, grads] = snapshots_[i];
      if (i > 0) {
        EXPECT_LT(offset, snapshots_[i - 1].first) << model << ": offsets must decrease";
      }
      for (int64_t e = offset; e < store_.size(); ++e)
        ASSERT_EQ(grads[size_t(e)], last[size_t(e)]) << model << ": element " << e << " changed after notification " << i;
    }
  }
  size_t count() const { return snapshots_.size(); }

 private:
  const ParamStore& store_;
  std::vector<std::pair<int64_t, std::vector<float>>> snapshots_;
};

TEST(GradBuckets, BertNamesOnlyFinalGradientsAfterItsHeadsAndEachLayer) {
  models::BertConfig c;
  c.vocab_size = 64;
  c.hidden = 32;
  c.layers = 3;
  c.heads = 4;
  c.intermediate = 64;
  c.max_position = 16;
  ParamStore store;
  models::BertForPretraining model(c, store);
  model.init_mlperf(3);
  data::BertBatch b;
  b.batch = 2, b.seq_len = 16, b.max_pred = 2;
  const RngStream rng{5, rng_stream(RngPurpose::test, 0, 0)};
  for (int i = 0; i < 32; ++i) b.input_ids.push_back(int32_t(1 + rng.below(uint64_t(i), 63)));
  b.segment_ids.assign(32, 0);
  b.input_mask.assign(32, 1);
  b.masked_positions = {1, 3, 2, 5};
  b.masked_ids = {7, 9, 11, 13};
  b.masked_weights = {1, 1, 1, 1};
  b.nsp_labels = {0, 1};
  FinalityCheck check(store);
  Step step;
  step.grad_watch = &check;
  model.forward(step, b);
  model.backward(step);
  check.expect_final("BERT");
  EXPECT_EQ(check.count(), size_t(c.layers) + 1);
}

TEST(GradBuckets, ResNetNamesOnlyFinalGradientsAfterFcAndEachBlock) {
  models::ResNetConfig config;
  config.block = models::ResNetBlock::basic;
  config.depths = {1, 1};
  config.widths = {8, 16};
  config.stem_width = 8;
  config.in_channels = 1;
  config.num_classes = 4;
  config.small_images = true;
  ParamStore store;
  models::ResNet model(config, store);
  model.init(7);
  const auto images = kiln::testing::random_normal(4 * 8 * 8, 11);
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  nn::SoftmaxCrossEntropy xent(0.0f);
  FinalityCheck check(store);
  Step step;
  step.grad_watch = &check;
  xent.forward(model.forward(step, images.data(), 4, 8, 8), labels.data());
  model.backward(step, xent.backward(1.0f));
  check.expect_final("ResNet");
  EXPECT_EQ(check.count(), 3u);
}

}  // namespace
}  // namespace kiln::train
