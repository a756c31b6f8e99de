// Memory of the training step: run through the real loop (run_training) with the loop's
// RunContext, bert-tiny and a tiny ResNet allocate device memory (kiln::allocation_count) in
// their first step and none at all in steps 3 to 6; the scratch arena then holds one block.
// Host heap allocations (operator new) inside the models' forward/backward are counted too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>
#include <utility>

#include "kiln/core/allocator.h"
#include "kiln/core/philox.h"
#include "kiln/models/bert.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lars.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/loop.h"

// Counts operator new calls while `g_counting` is set (this test binary only).
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_news{0};
void* counted_alloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace kiln::train {
namespace {

constexpr int64_t kSteps = 6;

// What the recipe saw: device allocations at the start of steps 1, 2 and 3 and after the last
// step (the loop evaluates there), and the host news inside forward/backward of steps 3..6.
struct Counts {
  int64_t at_step_start[3] = {-1, -1, -1};
  int64_t after_last = -1;
  int64_t host_news_steady = 0;
  size_t arena_blocks_capacity = 0, arena_high_water = 0;
};

class CountingRecipe : public Recipe {
 public:
  explicit CountingRecipe(const RunContext& run) : run_(run) { g_news = 0; }
  std::vector<std::string> loss_names() const override { return {"loss"}; }
  void load(const Step& step) override {
    if (step.index < 3) counts.at_step_start[step.index] = allocation_count();
  }
  void forward_backward(const Step& step, int64_t, float grad_scale) override {
    const bool steady = step.index >= 2;
    g_counting = steady;
    losses_ = run_step(step, grad_scale);
    g_counting = false;
    if (steady) counts.host_news_steady = g_news.load();
  }
  MicroBatchLosses read_losses(int64_t) override { return losses_; }
  double evaluate(int64_t, int64_t, Sinks&) override {
    counts.after_last = allocation_count();
    counts.arena_blocks_capacity = run_.scratch.capacity();
    counts.arena_high_water = run_.scratch.high_water();
    return 0;
  }
  std::string loss_text(const IntervalLosses&) const override { return "loss"; }
  std::string metric_name() const override { return "none"; }
  double flops_per_sample() const override { return 1; }
  void resume(const io::CheckpointMeta&, int64_t, Sinks&) override {}
  std::string start_line(int64_t) const override { return "memory test\n"; }

  Counts counts;

 protected:
  virtual MicroBatchLosses run_step(const Step& step, float grad_scale) = 0;
  const RunContext& run_;
  MicroBatchLosses losses_;
};

LoopConfig loop_config(Cadence::Kind kind) {
  LoopConfig c;
  c.seed = 7;
  c.total_steps = kSteps;
  c.global_batch = c.micro_batch = 4;
  c.log_interval = 1000;
  c.clip_grad = 0.5;  // exercises scale_grads too
  c.cadence.kind = kind;
  c.cadence.eval_interval = 1000;
  c.cadence.steps_per_epoch = kSteps;
  c.cadence.save_interval = 1000;
  return c;
}

void expect_steady_state_allocates_nothing(const Counts& c, const char* model) {
  SCOPED_TRACE(model);
  ASSERT_GE(c.at_step_start[0], 0);
  // The counter works: the first step allocates (arena blocks, layer buffers, scratch).
  EXPECT_GT(c.at_step_start[1] - c.at_step_start[0], 0);
  // After step 2 (the arena folded to its high-water block at the start of step 2's micro-batch
  // and buffers reached their sizes), steps 3..6 allocate nothing.
  EXPECT_EQ(c.after_last - c.at_step_start[2], 0);
  EXPECT_GT(c.arena_high_water, 0u);
  EXPECT_GE(c.arena_blocks_capacity, c.arena_high_water);  // one block, at least the high-water size
  std::printf("[ memory ] %s: device allocations: step 1 %lld, steps 3..%lld %lld; host news in "
              "forward/backward of steps 3..%lld: %lld; scratch arena %zu bytes; host peak %zu bytes\n",
              model, (long long)(c.at_step_start[1] - c.at_step_start[0]), (long long)kSteps,
              (long long)(c.after_last - c.at_step_start[2]), (long long)kSteps,
              (long long)c.host_news_steady, c.arena_high_water, host_bytes_peak());
}

class BertRecipe : public CountingRecipe {
 public:
  BertRecipe(const RunContext& run, models::BertForPretraining& model) : CountingRecipe(run), model_(model) {
    const int B = 4, S = 16, P = 3;
    b_.resize(B, S, P);
    const RngStream rng{11, rng_stream(RngPurpose::test, 0, 0)};
    uint64_t k = 0;
    for (int r = 0; r < B; ++r) {
      const int len = S - 2 * r;
      for (int s = 0; s < S; ++s) {
        b_.input_ids[r * S + s] = s < len ? int32_t(1 + rng.below(k++, 63)) : 0;
        b_.input_mask[r * S + s] = s < len;
        b_.segment_ids[r * S + s] = s < len && s >= len / 2;
      }
      for (int p = 0; p < P; ++p) {
        b_.masked_positions[r * P + p] = 1 + 2 * p;
        b_.masked_ids[r * P + p] = int32_t(rng.below(k++, 64));
        b_.masked_weights[r * P + p] = p < P - (r % 2) ? 1.0f : 0.0f;
      }
      b_.nsp_labels[r] = int32_t(rng.below(k++, 2));
    }
  }

 protected:
  MicroBatchLosses run_step(const Step& step, float grad_scale) override {
    const models::BertOutputs out = model_.forward(step, b_);
    model_.backward(step, grad_scale);
    return {out.loss, {out.loss}, 0, 0};
  }

 private:
  models::BertForPretraining& model_;
  data::BertBatch b_;
};

dist::Communicator& one_process() {
  static dist::SingleProcess comm;
  return comm;
}

// kSteps of the shared loop with silent sinks, then the allocation counts of `recipe`.
void expect_loop_allocates_nothing(CountingRecipe& recipe, TrainState state, Cadence::Kind kind, const char* model) {
  std::ostringstream console;
  Sinks sinks(false, console, "", "", 1);
  const LoopResult r = run_training(loop_config(kind), recipe, std::move(state), sinks, {});
  ASSERT_EQ(r.steps, kSteps);
  expect_steady_state_allocates_nothing(recipe.counts, model);
}

TEST(TrainingMemory, BertTinySteadyStateStepAllocatesNothing) {
  RunContext run;
  ParamStore store;
  models::BertConfig mc;
  mc.vocab_size = 64;
  mc.hidden = 32;
  mc.layers = 2;
  mc.heads = 4;
  mc.intermediate = 64;
  mc.max_position = 32;
  models::BertForPretraining model(mc, store, run.ctx);
  model.init_mlperf(3);
  optim::Lamb optimizer(store, optim::LambConfig{}, run.ctx);
  const optim::PolyWarmupSchedule schedule(1e-3, 1, kSteps, 1.0, 0.0);
  BertRecipe recipe(run, model);
  expect_loop_allocates_nothing(recipe, {store, optimizer, schedule, {}, run, one_process()},
                                Cadence::Kind::blocks, "bert-tiny");
}

class ResNetRecipe : public CountingRecipe {
 public:
  ResNetRecipe(const RunContext& run, models::ResNet& model) : CountingRecipe(run), model_(model) {
    const RngStream rng{5, rng_stream(RngPurpose::test, 0, 0)};
    images_.resize(size_t(N * H * W * 3));
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = float(rng.below(i, 1000)) / 500.0f - 1.0f;
    for (int64_t i = 0; i < N; ++i) labels_.push_back(int32_t(i % 5));
  }

 protected:
  MicroBatchLosses run_step(const Step& step, float grad_scale) override {
    const Tensor logits = model_.forward(step, images_.data(), N, H, W);
    const nn::LossResult r = loss_.forward(logits, labels_.data(), *step.ctx);
    model_.backward(step, loss_.backward(grad_scale));
    return {r.loss, {r.loss}, r.correct, int64_t(r.count)};
  }

 private:
  static constexpr int64_t N = 4, H = 8, W = 8;
  models::ResNet& model_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  nn::SoftmaxCrossEntropy loss_{0.1f};
};

TEST(TrainingMemory, TinyResNetSteadyStateStepAllocatesNothing) {
  RunContext run;
  ParamStore store;
  models::ResNetConfig mc;
  mc.block = models::ResNetBlock::basic;
  mc.depths = {1, 1};
  mc.widths = {4, 8};
  mc.stem_width = 4;
  mc.num_classes = 5;
  mc.small_images = true;
  models::ResNet model(mc, store, run.ctx);
  model.init(3);
  optim::Lars optimizer(store, optim::LarsConfig{}, run.ctx);
  const optim::PolyWarmupSchedule schedule(0.1, 1, kSteps, 2.0, 0.0);
  ResNetRecipe recipe(run, model);
  expect_loop_allocates_nothing(recipe, {store, optimizer, schedule, {}, run, one_process()},
                                Cadence::Kind::epochs, "tiny ResNet");
}

}  // namespace
}  // namespace kiln::train
