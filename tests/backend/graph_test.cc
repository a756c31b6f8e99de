// OpGraph (backend/graph.h) on the simulated device: captured ops run once during capture and
// again at each replay with the arguments they were captured with, while values the ops read
// from device memory (the step's scalars) are the current ones; copies between host and device
// inside a capture, the host device and an unsized arena are refused; a replay needs the scratch
// arena where the capture found it. Dropout's sample offset is such a value in device memory.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/backend/graph.h"
#include "kiln/core/error.h"
#include "tests/testing/error_of.h"

namespace kiln::ops {
namespace {
using testing::error_of;

struct SimRun {
  Arena arena{Device::sim()};
  Context ctx = device_context(Device::sim());
  SimRun() {
    ctx.scratch = &arena;
    (void)arena.alloc({1000}, DType::f32);  // a first step sizes the arena
    arena.reset();
  }
  Tensor on_sim(std::vector<float> v) { return on_device(ctx, Tensor::view(v.data(), {int64_t(v.size())})); }
  std::vector<float> host(const Tensor& t) { return to_float_vector(on_host(ctx, t)); }
  void set_unscale(Tensor& block, double value) {
    std::vector<double> s(kStepScalars, 0.0);
    s[kStepUnscale] = value;
    copy(ctx, Tensor::view(s.data(), {kStepScalars}, DType::i64), block);
  }
};

TEST(OpGraph, ReplayKeepsArgumentsAndReadsDeviceScalarsAnew) {
  SimRun r;
  Tensor x = r.on_sim({1, 2}), y = r.on_sim({1, 2});
  Tensor block = Tensor::empty({kStepScalars}, DType::i64, Device::sim());
  r.set_unscale(block, 0.5);
  float factor = 2.0f;
  (void)r.arena.alloc({2}, DType::f32);  // the host's scratch before the graph
  std::unique_ptr<OpGraph> graph = OpGraph::capture(r.ctx, [&] {
    scale_all(r.ctx, x, factor);
    Tensor scratch = r.ctx.scratch_tensor({2}, DType::f32);
    fill(r.ctx, scratch, 1.0f);
    scale_by_step_scalar(r.ctx, y, block, kStepUnscale);
  });
  EXPECT_EQ(graph->size(), 3u);
  EXPECT_EQ(r.host(x), std::vector<float>({2, 4}));  // capture ran the ops once
  EXPECT_EQ(r.host(y), std::vector<float>({0.5f, 1}));
  factor = 3.0f;              // an argument: frozen in the graph
  r.set_unscale(block, 4.0);  // device memory: read when the op runs
  r.arena.reset();
  EXPECT_FALSE(graph->can_replay());  // the host's allocation before the graph is missing
  (void)r.arena.alloc({2}, DType::f32);
  EXPECT_TRUE(graph->can_replay());
  graph->replay();
  EXPECT_EQ(r.host(x), std::vector<float>({4, 8}));
  EXPECT_EQ(r.host(y), std::vector<float>({2, 4}));
  EXPECT_EQ(r.arena.in_use(), 2 * 64u);  // as after the capture: the scratch the graph took
}

// Dropout takes its micro-batch's first sample from device memory: a replay after the offset moved
// gives the new samples' mask, the one an op-by-op run with that offset gives.
TEST(OpGraph, ReplayedDropoutTakesTheOffsetInDeviceMemory) {
  SimRun r;
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 1, 0)};
  const Tensor x = r.on_sim(std::vector<float>(64, 1.0f));
  Tensor y = r.on_sim(std::vector<float>(64, 0.0f)), want = r.on_sim(std::vector<float>(64, 0.0f));
  Tensor offset = Tensor::empty({1}, DType::i64, Device::sim());
  auto set_offset = [&](int64_t first_sample) { copy(r.ctx, Tensor::view(&first_sample, {1}, DType::i64), offset); };
  set_offset(0);
  std::unique_ptr<OpGraph> graph =
      OpGraph::capture(r.ctx, [&] { dropout_forward(r.ctx, x, {0.5f, rng, offset, 4}, y); });
  const std::vector<float> first = r.host(y);
  set_offset(8);
  graph->replay();
  dropout_forward(r.ctx, x, {0.5f, rng, offset, 4}, want);
  EXPECT_EQ(r.host(y), r.host(want));
  EXPECT_NE(r.host(y), first);  // other samples, another mask
}

// A cross-entropy's forward and backward in one graph: the backward divides by the weight sum of
// the batch the replay sees (read from the forward's totals), not by the captured batch's.
TEST(OpGraph, ReplayedCrossEntropyDividesByTheNewBatchsWeights) {
  SimRun r;
  const int64_t N = 4, V = 3;
  const Tensor logits =
      r.on_sim({0.1f, 0.2f, 0.3f, 1.0f, -1.0f, 0.5f, 2.0f, 0.0f, 0.0f, -0.5f, 0.5f, 1.5f}).reshape({N, V});
  Tensor labels = Tensor::empty({N}, DType::i32, Device::sim()), weights = r.on_sim({1, 1, 1, 1});
  Tensor lse = r.on_sim(std::vector<float>(N)), totals = Tensor::empty({3}, DType::i64, Device::sim());
  Tensor d = r.on_sim(std::vector<float>(N * V)).reshape({N, V});
  Tensor want = r.on_sim(std::vector<float>(N * V)).reshape({N, V});
  auto set_batch = [&](std::vector<int32_t> y, std::vector<float> w) {
    copy(r.ctx, Tensor::view(y.data(), {N}, DType::i32), labels);
    copy(r.ctx, Tensor::view(w.data(), {N}), weights);
  };
  auto step = [&](Tensor& out) {
    r.arena.reset();  // as each micro-batch starts
    softmax_xent_forward(r.ctx, logits, labels, weights, 0.0f, lse, totals);
    softmax_xent_backward(r.ctx, logits, lse, labels, weights, 0.0f, 1.0f, totals, {1e-5, 0.0}, out);
  };
  set_batch({0, 1, 2, 0}, {1, 1, 1, 1});
  std::unique_ptr<OpGraph> graph = OpGraph::capture(r.ctx, [&] { step(d); });
  const std::vector<float> first = r.host(d);
  set_batch({2, -1, 1, 0}, {1, 0, 0.5f, 1});  // Σ w 2.5 instead of 4
  r.arena.reset();
  graph->replay();
  step(want);
  EXPECT_EQ(r.host(d), r.host(want));
  // Row 3 is the same in both batches: only its divisor changed, from Σ w = 4 to 2.5.
  for (int64_t v = 0; v < V; ++v)
    EXPECT_NEAR(r.host(d)[size_t(9 + v)], first[size_t(9 + v)] * (4 + 1e-5) / (2.5 + 1e-5), 1e-6) << v;
}

// A batch's copy in through host staging: the data arrives, the staging grows for a bigger one,
// and inside a capture it is refused as a plain copy from the host is (a replay would copy stale
// bytes).
TEST(OpGraph, StagedCopiesFromTheHostRunOutsideCaptures) {
  SimRun r;
  HostStaging staging;
  std::vector<int32_t> ids = {3, 1, 4};
  Tensor dst = Tensor::empty({3}, DType::i32, Device::sim());
  staged_copy(r.ctx, Tensor::view(ids.data(), {3}, DType::i32), dst, staging);
  std::vector<int32_t> more = {2, 7, 1, 8, 2};
  Tensor bigger = Tensor::empty({5}, DType::i32, Device::sim());
  staged_copy(r.ctx, Tensor::view(more.data(), {5}, DType::i32), bigger, staging);
  const Tensor back = on_host(r.ctx, dst), back_bigger = on_host(r.ctx, bigger);
  EXPECT_EQ(std::vector<int32_t>(back.ptr<int32_t>(), back.ptr<int32_t>() + 3), ids);
  EXPECT_EQ(std::vector<int32_t>(back_bigger.ptr<int32_t>(), back_bigger.ptr<int32_t>() + 5), more);
  EXPECT_THROW(OpGraph::capture(r.ctx, [&] { staged_copy(r.ctx, Tensor::view(ids.data(), {3}, DType::i32), dst, staging); }),
               Error);
}

TEST(OpGraph, CaptureRefusesHostCopiesTheHostDeviceAndAnUnsizedArena) {
  SimRun r;
  Tensor x = r.on_sim({1, 2});
  std::vector<float> h(2);
  Tensor host = Tensor::view(h.data(), {2});
  EXPECT_EQ(error_of([&] { OpGraph::capture(r.ctx, [&] { copy(r.ctx, x, host); }); }),
            "op copy: sim -> cpu inside a graph capture; copies between host and device memory run outside the "
            "captured ops");
  EXPECT_EQ(r.ctx.recorder, nullptr);  // the failed capture is over
  copy(r.ctx, x, host);
  EXPECT_EQ(h, std::vector<float>({1, 2}));
  Context cpu = cpu_context();
  EXPECT_FALSE(OpGraph::can_capture(cpu));
  EXPECT_EQ(error_of([&] { OpGraph::capture(cpu, [] {}); }), "graph capture: the host device runs its ops directly");
  Arena fresh(Device::sim());
  r.ctx.scratch = &fresh;
  EXPECT_FALSE(OpGraph::can_capture(r.ctx));
  EXPECT_EQ(error_of([&] { OpGraph::capture(r.ctx, [] {}); }),
            "graph capture on sim: the context needs a scratch arena that a first step has sized");
}

}  // namespace
}  // namespace kiln::ops
