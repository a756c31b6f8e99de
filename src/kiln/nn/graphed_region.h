// nn/graphed_region.h — a stretch of ops that needs nothing from the host while it runs (the
// transformer layers' forward or backward, ResNet's body, the training loop's optimizer phase),
// captured as a graph and replayed
// (backend/graph.h): run op by op the first time a key is seen, captured the second time, replayed
// after that. Megatron-LM's per-layer CUDA graphs play the same role.
//
// A replay skips the host code of the layers inside, so whatever that code leaves behind must be
// what it left the last time it ran: the region replays a key only when the host code last ran
// with that key (an evaluation forward in between runs the next training forward op by op again),
// when no device memory was allocated since the capture (a buffer that grew has moved), and when
// the scratch arena is where the capture found it. A region that writes gradients passes their
// ParamStore: which gradients it overwrites rather than adds to depends on what the step wrote
// before, so that is part of the key, and a replay marks them written as its capture did.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/backend/graph.h"
#include "kiln/core/function_ref.h"
#include "kiln/core/step.h"
#include "kiln/nn/params.h"

namespace kiln::nn {

class GraphedRegion {
 public:
  // What the ops inside depend on that the host chooses: input addresses and shapes, batch
  // sizes, training or not (unused places 0). Two runs with the same key issue the same ops on
  // the same memory.
  using Key = std::array<int64_t, 6>;

  // Runs `body` (which returns the region's output: a buffer, not scratch) on ctx op by op,
  // captures it, or replays it; graphs only when `capture`. `grads`: the store whose gradients
  // the body writes (nullptr: none).
  Tensor run(Context& ctx, bool capture, const Key& key, ParamStore* grads, FunctionRef<Tensor()> body);
  // A model's stretch of a step: graphs where step.capture_regions is set.
  Tensor run(const Step& step, const Key& key, ParamStore* grads, FunctionRef<Tensor()> body) {
    return run(*step.ctx, step.capture_regions, key, grads, body);
  }

 private:
  struct Entry {
    Key key;
    std::vector<bool> grads_before, grads_after;  // ParamStore::grads_written()
    bool warm = false;                            // has run op by op once
    std::unique_ptr<ops::OpGraph> graph;
    int64_t allocations = 0;  // device_allocation_count() after the capture
    Tensor output;
  };
  Entry& entry(const Key& key, const std::vector<bool>& grads);
  static constexpr size_t kMaxEntries = 8;  // the oldest goes first

  std::vector<Entry> entries_;
  Key host_key_;  // the key the layers' host code last ran with
  bool host_ran_ = false;
};

}  // namespace kiln::nn
