// backend/graph.h — a sequence of ops captured once and replayed as one unit (tinygrad's TinyJit
// role): a CUDA graph on a GPU (stream capture records the ops without running them; the graph is
// then launched), and on the simulated device the CPU kernel calls kept with their arguments
// (backend/dispatch.cc, run_cpu_op), run during capture and again at each replay.
//
// A replay touches the memory the capture touched, with the arguments the host passed then: a
// value that changes between replays must be read from device memory by the ops (the step's
// scalars, backend.h), and the host must not read a result or copy between host and device
// memory inside the captured ops (the simulated device refuses such a copy, as a GPU's capture
// does). Scratch comes from ctx.scratch, which must hand out the same addresses at each replay:
// the arena is checked.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "kiln/core/context.h"

namespace kiln::ops {

class OpGraph {
 public:
  // Whether ctx can capture: a GPU or the simulated device, with a scratch arena folded into
  // one block (after a first step).
  static bool can_capture(const Context& ctx);
  // Runs the ops `body` issues on ctx once, as a graph, and keeps them. Throws kiln::Error
  // unless can_capture(ctx), or when an op cannot be captured.
  static std::unique_ptr<OpGraph> capture(Context& ctx, const std::function<void()>& body);
  virtual ~OpGraph() = default;

  // Whether the scratch arena is where it was at capture (same block, same offset): else the
  // host's allocations before the graph changed, or the arena grew (during the capture itself,
  // or for a bigger evaluation batch), and the graph must be captured again.
  bool can_replay() const;
  // Runs the captured ops again. Throws kiln::Error unless can_replay().
  void replay();
  // The number of ops captured (kernel calls on the simulated device, graph nodes on a GPU).
  virtual size_t size() const = 0;

 protected:
  explicit OpGraph(Context& ctx) : ctx_(ctx) {}
  virtual void launch() = 0;
  Context& ctx_;

 private:
  size_t scratch_begin_ = 0;  // the arena's in_use() when the capture began
  Arena::Mark scratch_end_;   // and where it was when it ended
  int64_t scratch_blocks_ = 0;                  // its block_allocations() then
};

}  // namespace kiln::ops
