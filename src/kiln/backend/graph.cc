#include "kiln/backend/graph.h"

#include <utility>
#include <vector>

#include "kiln/backend/dispatch_cuda.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

// The simulated device's graph: the kernel calls that run_cpu_op (dispatch.cc) recorded, each with
// the arena position it started at.
class SimGraph final : public OpGraph, public OpRecorder {
 public:
  explicit SimGraph(Context& ctx) : OpGraph(ctx) {}
  void record(std::function<void(Context&)> op) override { ops_.push_back({std::move(op), ctx_.scratch->mark()}); }
  size_t size() const override { return ops_.size(); }

 private:
  void launch() override {
    for (auto& [op, scratch] : ops_) {
      ctx_.scratch->restore(scratch);
      op(ctx_);
    }
  }
  struct Recorded {
    std::function<void(Context&)> op;
    Arena::Mark scratch;
  };
  std::vector<Recorded> ops_;
};

std::unique_ptr<OpGraph> capture_sim(Context& ctx, const std::function<void()>& body) {
  auto graph = std::make_unique<SimGraph>(ctx);
  ctx.recorder = graph.get();
  try {
    body();
  } catch (...) {
    ctx.recorder = nullptr;
    throw;
  }
  ctx.recorder = nullptr;
  return graph;
}

// The CUDA backend's stream capture, or the error saying that this build has no CUDA backend.
std::unique_ptr<OpGraph> capture_cuda(Context& ctx, const std::function<void()>& body) {
#ifdef KILN_HAVE_CUDA
  return cuda::capture_graph(ctx, body);
#else
  no_backend(ctx, "graph capture");
#endif
}

}  // namespace

bool OpGraph::can_capture(const Context& ctx) {
  return ctx.device.kind != DeviceKind::cpu && ctx.scratch && ctx.scratch->folded();
}

std::unique_ptr<OpGraph> OpGraph::capture(Context& ctx, const std::function<void()>& body) {
  KILN_CHECK(ctx.device.kind != DeviceKind::cpu, "graph capture: the host device runs its ops directly");
  KILN_CHECK(can_capture(ctx), "graph capture on {}: the context needs a scratch arena that a first step has sized",
             ctx.device.str());
  KILN_CHECK(!ctx.recorder, "graph capture on {}: a capture is already under way", ctx.device.str());
  const size_t begin = ctx.scratch->in_use();
  const int64_t blocks = ctx.scratch->block_allocations();
  std::unique_ptr<OpGraph> graph = on_cuda(ctx) ? capture_cuda(ctx, body) : capture_sim(ctx, body);
  graph->scratch_begin_ = begin;
  graph->scratch_end_ = ctx.scratch->mark();
  graph->scratch_blocks_ = blocks;
  if (on_cuda(ctx)) graph->launch();  // stream capture recorded the ops without running them
  ++ctx.graph_captures;
  return graph;
}

bool OpGraph::can_replay() const {
  return ctx_.scratch->in_use() == scratch_begin_ && ctx_.scratch->block_allocations() == scratch_blocks_;
}

void OpGraph::replay() {
  KILN_CHECK(can_replay(),
             "graph replay on {}: the scratch arena is at byte {} ({} block allocations), the capture "
             "started at byte {} ({}): the host's allocations before the graph changed",
             ctx_.device.str(), ctx_.scratch->in_use(), ctx_.scratch->block_allocations(), scratch_begin_,
             scratch_blocks_);
  launch();
  ctx_.scratch->restore(scratch_end_);
  ++ctx_.graph_replays;
}

}  // namespace kiln::ops
