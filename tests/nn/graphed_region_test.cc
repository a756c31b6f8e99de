// nn::GraphedRegion on the simulated device: op by op the first time a key is seen, captured the
// second time, replayed after; a replay needs the layers' host code to have last run with the same
// key and no device allocation since the capture; it marks the gradients its capture wrote.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/nn/graphed_region.h"
#include "kiln/nn/params.h"

namespace kiln::nn {
namespace {

struct SimSteps {
  Arena arena{Device::sim()};
  Context ctx = device_context(Device::sim());
  Step step;
  SimSteps() {
    ctx.scratch = &arena;
    (void)arena.alloc({64}, DType::f32);  // a first step sizes the arena
    arena.reset();
    step.ctx = &ctx;
    step.capture_regions = true;
  }
  float first(const Tensor& t) { return to_float_vector(ops::on_host(ctx, t))[0]; }
};

TEST(GraphedRegion, RunsThenCapturesThenReplaysWhileTheHostStateHolds) {
  SimSteps s;
  Tensor x = ops::on_device(s.ctx, Tensor::zeros({1}));
  float one_value = 1.0f;
  const Tensor one = ops::on_device(s.ctx, Tensor::view(&one_value, {1}));
  int host_runs = 0;
  GraphedRegion region;
  const auto body = [&] {
    ++host_runs;
    ops::add(s.ctx, x, one, x);
    return x;
  };
  for (int i = 0; i < 4; ++i) region.run(s.step, {7}, nullptr, body);
  EXPECT_EQ(s.first(x), 4.0f);  // every run added, replayed or not
  EXPECT_EQ(host_runs, 2);      // op by op, then the capture
  EXPECT_EQ(s.ctx.graph_captures, 1);
  EXPECT_EQ(s.ctx.graph_replays, 2);

  // Another key's host code ran (an evaluation): the next run of key 7 goes op by op, then the
  // graph replays again; no new capture.
  region.run(s.step, {8}, nullptr, body);
  region.run(s.step, {7}, nullptr, body);
  region.run(s.step, {7}, nullptr, body);
  EXPECT_EQ(s.first(x), 7.0f);
  EXPECT_EQ(host_runs, 4);
  EXPECT_EQ(s.ctx.graph_captures, 1);
  EXPECT_EQ(s.ctx.graph_replays, 3);

  // A device allocation since the capture (a buffer that grew moved): captured again.
  (void)Tensor::empty({4}, DType::f32, Device::sim());
  region.run(s.step, {7}, nullptr, body);
  EXPECT_EQ(s.ctx.graph_captures, 2);

  // Without capture_regions: always op by op.
  s.step.capture_regions = false;
  const int before = host_runs;
  for (int i = 0; i < 3; ++i) region.run(s.step, {7}, nullptr, body);
  EXPECT_EQ(host_runs, before + 3);
  EXPECT_EQ(s.first(x), 11.0f);
}

// The first micro-batch overwrites a gradient, later ones add to it: one graph each, and a replay
// tells the store which gradients it wrote.
TEST(GraphedRegion, KeysGraphsByTheGradientsWrittenAndMarksWhatAReplayWrote) {
  SimSteps s;
  ParamStore store;
  const Param w = store.add("w", {2}, true);
  store.allocate();
  store.to_device(s.ctx);
  GraphedRegion region;
  const auto backward = [&] {
    const Param::GradTarget g = w.grad_for_write();
    Tensor grad = g.grad;
    if (g.accumulate) ops::scale_all(s.ctx, grad, 2.0f);  // stands for "add"
    else ops::fill(s.ctx, grad, 1.0f);
    return Tensor{};
  };
  for (int step = 0; step < 4; ++step) {
    store.clear_grads();
    region.run(s.step, {1}, &store, backward);  // first micro-batch: writes 1
    EXPECT_TRUE(store.grads_written()[0]) << step;
    region.run(s.step, {1}, &store, backward);  // second: doubles
    store.settle_grads();  // would zero a gradient it thinks nothing wrote
    EXPECT_EQ(s.first(store.grads), 2.0f) << step;
  }
  EXPECT_EQ(s.ctx.graph_captures, 2);  // one per state of the gradient
  EXPECT_EQ(s.ctx.graph_replays, 4);
}

}  // namespace
}  // namespace kiln::nn
