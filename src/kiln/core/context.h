// core/context.h — what every op receives besides its tensors: the device that runs it, the
// stream it is ordered on, and the scratch arena for memory that does not outlive the step.
// Library handles (oneDNN engine, cuBLASLt, cuDNN) belong to the backend of ctx.device.
#pragma once
#include <cstdint>
#include <functional>

#include "kiln/core/arena.h"
#include "kiln/core/device.h"

namespace kiln {

struct Context;

// Keeps the ops run on a context while a graph is captured on the simulated device
// (backend/graph.h): each op's kernel call with its arguments, for replay.
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  virtual void record(std::function<void(Context&)> op) = 0;
};

struct Context {
  Device device;
  void* stream = nullptr;   // cudaStream_t on CUDA; unused on the CPU
  Arena* scratch = nullptr; // per-step scratch (reset by the training loop each step)
  OpRecorder* recorder = nullptr;  // set while a graph is captured on the simulated device
  int64_t graph_captures = 0, graph_replays = 0;  // backend/graph.h, for the run's report

  // Scratch tensor on this context's device: from the arena when there is one.
  Tensor scratch_tensor(const Shape& shape, DType dtype) const {
    return scratch ? scratch->alloc(shape, dtype) : Tensor::empty(shape, dtype, device);
  }
};

// Frees, when it goes out of scope, the scratch taken from ctx's arena since it was made: an op's
// own working memory (lane sums), which no later op reads. Ops on one stream run in order, so the
// next op may reuse the memory even while this op's kernels are queued.
class ScratchScope {
 public:
  explicit ScratchScope(const Context& ctx) : arena_(ctx.scratch), mark_(arena_ ? arena_->mark() : Arena::Mark{}) {}
  ~ScratchScope() {
    if (arena_) arena_->restore(mark_);
  }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Arena* arena_;
  Arena::Mark mark_;
};

// The process-wide CPU context (no arena): for tools, tests and host-side setup.
inline Context& cpu_context() {
  static Context ctx;
  return ctx;
}

}  // namespace kiln
