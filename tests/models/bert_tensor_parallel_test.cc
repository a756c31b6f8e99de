// BertForPretraining, and the last of two pipeline stages (models/bert_stage.h), split over two
// tensor-parallel ranks (two threads joined by an in-process communicator) against the unsplit
// model / stage: the parts start from the whole model's weights, and one training forward +
// backward (dropout on) gives the same losses and, put together, the same gradients; replicated
// parameters get bitwise identical gradients on both ranks.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/arena.h"
#include "kiln/core/error.h"
#include "kiln/core/philox.h"
#include "kiln/models/bert.h"

namespace kiln::models {
namespace {

// Two ranks in one process: all_reduce_sum (in rank order, f32 summed in f64) and all_gather.
struct ThreadPair {
  std::barrier<> sync{2};
  const Tensor* slots[2] = {};
};

class ThreadRank final : public dist::Communicator {
 public:
  ThreadRank(ThreadPair& pair, int rank) : pair_(pair), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void all_reduce_sum(Tensor& t) override {
    share(t);
    std::vector<double> sum(size_t(t.numel()), 0.0);
    for (const Tensor* s : pair_.slots)
      for (int64_t i = 0; i < t.numel(); ++i)
        sum[size_t(i)] += t.dtype == DType::f64 ? s->ptr<double>()[i] : double(s->ptr<float>()[i]);
    pair_.sync.arrive_and_wait();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.dtype == DType::f64) t.ptr<double>()[i] = sum[size_t(i)];
      else t.ptr<float>()[i] = float(sum[size_t(i)]);
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    share(in);
    for (int r = 0; r < 2; ++r)
      std::memcpy(static_cast<std::byte*>(out.data) + r * in.nbytes(), pair_.slots[r]->data, in.nbytes());
    pair_.sync.arrive_and_wait();
  }
  void broadcast(Tensor&, int) override { unused(); }
  void barrier() override { pair_.sync.arrive_and_wait(); }
  void reduce_scatter_sum(const Tensor&, Tensor&) override { unused(); }
  std::unique_ptr<dist::Request> isend(const Tensor&, int) override { unused(); }
  std::unique_ptr<dist::Request> irecv(Tensor&, int) override { unused(); }
  std::unique_ptr<dist::Communicator> split(int, int) override { unused(); }

 private:
  void share(const Tensor& t) {
    pair_.slots[rank_] = &t;
    pair_.sync.arrive_and_wait();
  }
  [[noreturn]] static void unused() { throw Error("ThreadRank: not used by tensor-parallel layers"); }
  ThreadPair& pair_;
  int rank_;
};

BertConfig tiny(bool pre_ln) {
  BertConfig c;
  c.vocab_size = 64;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.intermediate = 64;
  c.max_position = 32;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  c.init_std = 0.2f;
  c.pre_ln = pre_ln;
  return c;
}

data::BertBatch batch(int B, int S, int P, int vocab) {
  const RngStream rng{21, rng_stream(RngPurpose::test, 0, 0)};
  uint64_t k = 0;
  data::BertBatch b;
  b.batch = B, b.seq_len = S, b.max_pred = P;
  for (int r = 0; r < B; ++r) {
    const int length = S - 3 * r;
    for (int s = 0; s < S; ++s) {
      b.input_ids.push_back(s < length ? int32_t(rng.below(k++, uint64_t(vocab))) : 0);
      b.input_mask.push_back(s < length);
      b.segment_ids.push_back(s >= length / 2 && s < length);
    }
    for (int p = 0; p < P; ++p) {
      b.masked_positions.push_back(1 + 2 * p);
      b.masked_ids.push_back(int32_t(rng.below(k++, uint64_t(vocab))));
      b.masked_weights.push_back(p < P - r ? 1.0f : 0.0f);
    }
    b.nsp_labels.push_back(int32_t(r % 2));
  }
  return b;
}

// Element e of a part: its index in the whole parameter.
int64_t whole_index(const ParamSpec& s, int64_t e) {
  if (s.part_dim < 0) return e;
  const int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1,
                whole_cols = s.full_shape.size() == 2 ? s.full_shape[1] : 1;
  const int64_t i = e / cols, j = e % cols;
  return s.part_dim == 0 ? (s.part_start + i) * whole_cols + j : i * whole_cols + s.part_start + j;
}

struct RankResult {
  BertOutputs out;
  std::vector<float> initial;  // the rank's parameters after init_mlperf
  ParamStore store;
};

// The ranks' initial weights are the whole store's, their gradients put together the whole
// store's; replicated gradients are bitwise identical on both ranks and counted in norms on rank 0.
void expect_parts_of(const ParamStore& whole_store, const RankResult (&ranks)[2], const std::string& what) {
  const std::vector<float> wg = whole_store.grads_vector(), wv = whole_store.values_vector();
  for (const ParamSpec& w : whole_store.specs()) {
    std::vector<double> g(size_t(w.numel), 0.0);
    for (int r = 0; r < 2; ++r) {
      const ParamSpec& s = *ranks[r].store.find(w.name);
      EXPECT_EQ(s.norm_owner, w.norm_owner && (r == 0 || s.part_dim >= 0)) << w.name;
      const std::vector<float> rg = ranks[r].store.grads_vector();
      for (int64_t e = 0; e < s.numel; ++e) {
        const int64_t at = whole_index(s, e);
        ASSERT_EQ(ranks[r].initial[size_t(s.offset + e)], wv[size_t(w.offset + at)]) << w.name << " init";
        if (s.part_dim < 0 && r == 1) {
          ASSERT_EQ(float(g[size_t(at)]), rg[size_t(s.offset + e)]) << w.name << " differs across ranks";
        }
        g[size_t(at)] = rg[size_t(s.offset + e)];
      }
    }
    double d = 0, n = 0;
    for (int64_t i = 0; i < w.numel; ++i) {
      d += std::pow(g[size_t(i)] - wg[size_t(w.offset + i)], 2);
      n += std::pow(double(wg[size_t(w.offset + i)]), 2);
    }
    if (w.name.find("attention.self.key.bias") != std::string::npos) continue;  // analytically 0
    EXPECT_LE(std::sqrt(d), 1e-5 * std::sqrt(n) + 1e-9) << w.name << " " << what;
  }
}

// With either attention core (fused: head dim 16, its dropout keyed by the rank's global heads).
TEST(BertTensorParallel, TwoRanksComputeTheWholeModelsLossAndGradients) {
  for (bool pre_ln : {false, true})
    for (nn::AttentionCore core : {nn::AttentionCore::unfused, nn::AttentionCore::fused}) {
      BertConfig c = tiny(pre_ln);
      c.attention_core = core;
      if (core == nn::AttentionCore::fused) c.hidden = 64, c.intermediate = 128;
      const data::BertBatch b = batch(3, 16, 4, int(c.vocab_size));
      const Step step{7, 0, true, 5};
      ParamStore whole_store;
      BertForPretraining whole(c, whole_store);
      whole.init_mlperf(3);
      const BertOutputs want = whole.forward(step, b);
      whole.backward(step, 1.0f);

      ThreadPair pair;
      RankResult ranks[2];
      auto run = [&](int r) {
        ThreadRank comm(pair, r);
        Arena scratch;  // each rank's own, as each process has
        Context ctx{Device::cpu(), nullptr, &scratch};
        BertForPretraining model(c, ranks[r].store, ctx, nn::TensorParallel::over(comm));
        model.init_mlperf(3);
        ranks[r].initial = ranks[r].store.values_vector();
        Step s = step;
        s.ctx = &ctx;
        ranks[r].out = model.forward(s, b);
        model.backward(s, 1.0f);
      };
      std::thread other(run, 1);
      run(0);
      other.join();

      for (const RankResult& r : ranks) {
        EXPECT_NEAR(r.out.loss, want.loss, 1e-5 * want.loss) << "pre_ln " << pre_ln;
        EXPECT_NEAR(r.out.mlm_loss, want.mlm_loss, 1e-5 * want.mlm_loss);
        EXPECT_EQ(r.out.mlm_correct, want.mlm_correct);
        EXPECT_EQ(r.out.nsp_correct, want.nsp_correct);
      }
      expect_parts_of(whole_store, ranks, std::string(pre_ln ? "pre-LN" : "post-LN") +
                                              (core == nn::AttentionCore::fused ? " fused" : ""));
    }
}

// The last of two pipeline stages over two tensor-parallel ranks: its own vocab-parallel copy of
// the word embedding as the decoder, not counted in norms; the same loss, input gradient and
// parameter gradients as the unsplit last stage.
TEST(BertTensorParallel, TwoRanksOfTheLastPipelineStageComputeTheUnsplitStage) {
  const BertConfig c = tiny(true);
  const StageRange range = bert_stage_range(c, 1, 2);
  const data::BertBatch b = batch(3, 16, 4, int(c.vocab_size));
  const Step step{7, 0, true, 5};
  Tensor input = Tensor::empty({3 * 16, c.hidden});
  const RngStream rng{9, rng_stream(RngPurpose::test, 0, 0)};
  for (int64_t i = 0; i < input.numel(); ++i) input.ptr<float>()[i] = rng.uniform(uint64_t(i)) - 0.5f;
  ParamStore whole_store;
  BertStage whole(c, range, whole_store);
  whole_store.allocate();
  init_bert_weights(whole_store, 3, c.init_std);
  BertOutputs want;
  whole.forward(step, b, input, &want);
  const std::vector<float> want_dx = to_float_vector(whole.backward(step, {}, 1.0f));

  ThreadPair pair;
  RankResult ranks[2];
  std::vector<float> dx[2];
  auto run = [&](int r) {
    ThreadRank comm(pair, r);
    Arena scratch;
    Context ctx{Device::cpu(), nullptr, &scratch};
    BertStage stage(c, range, ranks[r].store, nn::TensorParallel::over(comm));
    ranks[r].store.allocate(ctx);
    init_bert_weights(ranks[r].store, 3, c.init_std);
    ranks[r].initial = ranks[r].store.values_vector();
    Step s = step;
    s.ctx = &ctx;
    stage.forward(s, b, input, &ranks[r].out);
    dx[r] = to_float_vector(stage.backward(s, {}, 1.0f));
  };
  std::thread other(run, 1);
  run(0);
  other.join();

  EXPECT_FALSE(whole_store.find("bert.embeddings.word_embeddings.weight")->norm_owner);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(ranks[r].out.loss, want.loss, 1e-5 * want.loss);
    EXPECT_EQ(ranks[r].out.mlm_correct, want.mlm_correct);
    ASSERT_EQ(dx[r].size(), want_dx.size());
    double d = 0, n = 0;
    for (size_t i = 0; i < want_dx.size(); ++i) d += std::pow(double(dx[r][i]) - want_dx[i], 2), n += std::pow(double(want_dx[i]), 2);
    EXPECT_LE(std::sqrt(d), 1e-5 * std::sqrt(n)) << "input gradient on rank " << r;
  }
  EXPECT_EQ(dx[0], dx[1]);
  expect_parts_of(whole_store, ranks, "last stage");
}

}  // namespace
}  // namespace kiln::models
