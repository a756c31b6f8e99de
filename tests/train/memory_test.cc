// Memory of the training step: run through the real loop (run_training) with the loop's
// RunContext, bert-tiny and a tiny ResNet allocate device memory (kiln::allocation_count) in
// their first step and none at all in steps 3 to 6; the scratch arena then holds one block.
// Host heap allocations (operator new) over whole steps 3 to 5 (forward, backward, loss read-back,
// the optimizer phase and the loop's bookkeeping; the batch is fixed, no loader runs) are counted by
// who made them: kiln's code makes none. oneDNN 2.6 allocates inside every primitive execution
// (its C API builds a map of the arguments), and the OpenMP runtime now and then; those are
// reported, not asserted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>
#include <utility>

#include "kiln/core/allocator.h"
#include "kiln/core/error.h"
#include "kiln/core/philox.h"
#include "kiln/data/bert/bert_batch.h"
#include "kiln/models/bert.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lars.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/loop.h"
#include "tools/alloc_count/caller_library.h"

// Counts operator new calls while `g_counting` is set (this test binary only) and keeps each
// one's caller, in fixed storage, to be attributed to a library once counting stops.
namespace {
namespace alloc_count = kiln::alloc_count;
constexpr int64_t kMaxCallers = int64_t(1) << 16;
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_news{0};
void* g_callers[kMaxCallers];

void* counted_alloc(std::size_t n, void* caller) {
  if (g_counting.load(std::memory_order_relaxed)) {
    const int64_t i = g_news.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxCallers) g_callers[i] = caller;
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

// Host allocations of one counting window by who called operator new.
struct HostNews {
  int64_t kiln = 0, onednn = 0, openmp = 0;
};

void start_counting() {
  g_news = 0;
  g_counting = true;
}

// Stops counting and attributes each call by the shared object its caller lies in
// (tools/alloc_count/caller_library.h).
HostNews stop_counting() {
  using alloc_count::CallerLibrary;
  g_counting = false;
  HostNews news;
  const int64_t n = g_news.load();
  news.kiln += std::max<int64_t>(n - kMaxCallers, 0);  // unattributed: counted against kiln
  for (int64_t i = 0; i < std::min(n, kMaxCallers); ++i) {
    const CallerLibrary library = alloc_count::caller_library(g_callers[i]);
    if (library == CallerLibrary::onednn) ++news.onednn;
    else if (library == CallerLibrary::openmp) ++news.openmp;
    else ++news.kiln;  // MPI is not initialised in this test
  }
  return news;
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, __builtin_return_address(0)); }
void* operator new[](std::size_t n) { return counted_alloc(n, __builtin_return_address(0)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace kiln::train {
namespace {

constexpr int64_t kSteps = 6;

// What the recipe saw: device allocations at the start of steps 1, 2 and 3 and after the last
// step (the loop evaluates there), and the host news of step 1 and of steps 3..5, from one
// step's load to the next one's.
struct Counts {
  int64_t at_step_start[3] = {-1, -1, -1};
  int64_t after_last = -1;
  HostNews first_step, steady;
  size_t arena_blocks_capacity = 0, arena_high_water = 0;
};

class CountingRecipe : public Recipe {
 public:
  explicit CountingRecipe(const RunContext& run) : run_(run) {}
  std::vector<std::string> loss_names() const override { return {"loss"}; }
  void load(const Step& step) override {
    if (step.index < 3) counts.at_step_start[step.index] = allocation_count();
    if (step.index == 1) counts.first_step = stop_counting();
    if (step.index == 5) counts.steady = stop_counting();
    if (step.index == 0 || step.index == 2) start_counting();
  }
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
  const RunContext& run_;
};

LoopConfig loop_config(Cadence::Kind kind) {
  LoopConfig c;
  c.seed = 7;
  c.total_steps = kSteps;
  c.log_interval = 1000;
  c.clip_grad = 0.5;  // exercises scale_grads too
  c.cadence.kind = kind;
  c.cadence.eval_interval = 1000;
  c.cadence.steps_per_epoch = kSteps;
  c.cadence.save_interval = 1000;
  return c;
}

void expect_steady_state_allocates_nothing(const Counts& c, const std::string& model) {
  SCOPED_TRACE(model);
  ASSERT_GE(c.at_step_start[0], 0);
  // The counter works: the first step allocates (arena blocks, layer buffers, scratch).
  EXPECT_GT(c.at_step_start[1] - c.at_step_start[0], 0);
  // After step 2 (the arena folded to its high-water block at the start of step 2's micro-batch
  // and buffers reached their sizes), steps 3..6 allocate nothing.
  EXPECT_EQ(c.after_last - c.at_step_start[2], 0);
  EXPECT_GT(c.arena_high_water, 0u);
  EXPECT_GE(c.arena_blocks_capacity, c.arena_high_water);  // one block, at least the high-water size
  // The hook sees kiln's host allocations (the first step makes its buffers), and steps 3..5 make none.
  EXPECT_GT(c.first_step.kiln, 0);
  EXPECT_EQ(c.steady.kiln, 0);
  std::printf("[ memory ] %s: device allocations: step 1 %lld, steps 3..%lld %lld; host news in step 1: kiln %lld; "
              "in steps 3..5: kiln %lld, oneDNN %lld, OpenMP %lld; scratch arena %zu bytes; host peak %zu bytes\n",
              model.c_str(), (long long)(c.at_step_start[1] - c.at_step_start[0]), (long long)kSteps,
              (long long)(c.after_last - c.at_step_start[2]), (long long)c.first_step.kiln,
              (long long)c.steady.kiln, (long long)c.steady.onednn, (long long)c.steady.openmp,
              c.arena_high_water, host_bytes_peak());
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

  // As the BERT recipe does: the losses stay on the device until the loop reads them.
  void forward_backward(const Step& step, int64_t, float grad_scale) override {
    model_.forward_backward(step, b_, grad_scale);
    model_.keep_losses(losses_);
  }
  MicroBatchLosses read_losses(int64_t) override {
    const models::BertOutputs out = model_.read_losses(losses_);
    return {out.loss, {out.loss}, 0, 0};
  }

 private:
  models::BertForPretraining& model_;
  data::BertBatch b_;
  Tensor losses_ = Tensor::empty({models::BertForPretraining::kLossTotals}, DType::i64);
};

dist::Communicator& one_process() {
  static dist::SingleProcess comm;
  return comm;
}

// One process's data parallelism: a global batch of 4 in one micro-batch.
DataParallel& one_process_batch() {
  static DataParallel dp(one_process(), 4, 4);
  return dp;
}

// kSteps of the shared loop with silent sinks, then the allocation counts of `recipe`.
void expect_loop_allocates_nothing(CountingRecipe& recipe, TrainState state, Cadence::Kind kind, DType dtype,
                                   const char* model) {
  std::ostringstream console;
  Sinks sinks(false, console, "", "", 1);
  const LoopResult r = run_training(loop_config(kind), recipe, std::move(state), sinks, {});
  ASSERT_EQ(r.steps, kSteps);
  expect_steady_state_allocates_nothing(recipe.counts, fmt::format("{} {}", model, dtype_name(dtype)));
}

void expect_bert_tiny_allocates_nothing(DType dtype) {
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
  store.set_compute_dtype(dtype);
  store.to_device(run.ctx);
  optim::Lamb optimizer(store, optim::LambConfig{}, run.ctx);
  const optim::PolyWarmupSchedule schedule(1e-3, 1, kSteps, 1.0, 0.0);
  BertRecipe recipe(run, model);
  expect_loop_allocates_nothing(recipe, {store, optimizer, schedule, {}, run, one_process_batch()},
                                Cadence::Kind::blocks, dtype, "bert-tiny");
}

TEST(TrainingMemory, BertTinySteadyStateStepAllocatesNothing) {
  for (DType dtype : {DType::f32, DType::bf16}) expect_bert_tiny_allocates_nothing(dtype);
}

class ResNetRecipe : public CountingRecipe {
 public:
  ResNetRecipe(const RunContext& run, models::ResNet& model) : CountingRecipe(run), model_(model) {
    const RngStream rng{5, rng_stream(RngPurpose::test, 0, 0)};
    images_.resize(size_t(N * H * W * 3));
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = float(rng.below(i, 1000)) / 500.0f - 1.0f;
    for (int64_t i = 0; i < N; ++i) labels_.push_back(int32_t(i % 5));
  }

  // As the ResNet recipe does.
  void forward_backward(const Step& step, int64_t, float grad_scale) override {
    model_.forward_backward(step, images_.data(), N, H, W, labels_.data(), loss_, grad_scale);
  }
  MicroBatchLosses read_losses(int64_t) override {
    const nn::LossResult r = loss_.read();
    return {r.loss, {r.loss}, r.correct, int64_t(r.count)};
  }

 private:
  static constexpr int64_t N = 4, H = 16, W = 16;
  models::ResNet& model_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  nn::SoftmaxCrossEntropy loss_{0.1f};
};

void expect_tiny_resnet_allocates_nothing(DType dtype) {
  RunContext run;
  ParamStore store;
  models::ResNetConfig mc;
  // Bottlenecks as in ResNet-50; the second stage's strided 3x3 (64 channels) and projection run as
  // window products (backend/cpu/conv.cc).
  mc.block = models::ResNetBlock::bottleneck;
  mc.depths = {1, 1};
  mc.widths = {16, 64};
  mc.stem_width = 16;
  mc.num_classes = 5;
  mc.small_images = false;  // ImageNet's stem: its max pool runs too
  models::ResNet model(mc, store, run.ctx);
  model.init(3);
  store.set_compute_dtype(dtype);
  model.to_device(run.ctx);
  optim::Lars optimizer(store, optim::LarsConfig{}, run.ctx);
  const optim::PolyWarmupSchedule schedule(0.1, 1, kSteps, 2.0, 0.0);
  ResNetRecipe recipe(run, model);
  expect_loop_allocates_nothing(recipe, {store, optimizer, schedule, {}, run, one_process_batch()},
                                Cadence::Kind::epochs, dtype, "tiny ResNet");
}

TEST(TrainingMemory, TinyResNetSteadyStateStepAllocatesNothing) {
  for (DType dtype : {DType::f32, DType::bf16}) expect_tiny_resnet_allocates_nothing(dtype);
}

// The loaders check every BERT row they hand out (ids, segments, masked positions, labels): a row
// that passes allocates nothing, one that fails names what is wrong.
TEST(TrainingMemory, CheckingAValidBertRowAllocatesNothing) {
  data::BertBatch batch;
  data::fill_fake_batch(batch, 2, 16, 3, 64, 9, 0);
  start_counting();
  for (int slot = 0; slot < 2; ++slot) data::check_bert_row(batch, slot, 64, "test rows", slot);
  EXPECT_EQ(stop_counting().kiln, 0);
  batch.masked_ids[0] = 64;
  EXPECT_THROW(data::check_bert_row(batch, 0, 64, "test rows", 0), Error);
}

}  // namespace
}  // namespace kiln::train
