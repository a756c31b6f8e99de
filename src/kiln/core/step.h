// core/step.h — what a layer needs to know about the current (micro-)step.
#pragma once
#include <cstdint>

#include "kiln/core/context.h"
#include "kiln/core/dtype.h"
#include "kiln/core/tensor.h"

namespace kiln {

// Listens to the backward of a step's last micro-batch (data-parallel gradient buckets,
// train/grad_buckets.h): the model says which gradients are final, so that their reduction
// can start while the rest of the backward runs.
class GradientWatch {
 public:
  virtual ~GradientWatch() = default;
  // Every gradient at flat offset >= `offset` of the step's ParamStore is final.
  virtual void final_from(int64_t offset) = 0;
};

struct Step {
  uint64_t seed = 0;      // run seed; keys every dropout mask
  uint64_t index = 0;     // micro-step counter: step * accumulation + micro-batch
  bool training = true;   // dropout on, batch statistics on
  // Global index of this micro-batch's first sample in the run's sample order: dropout masks
  // are keyed by (layer, sample_offset + row, position in the sample), so they do not depend
  // on the micro-batch size, the batch slot or (later) the data-parallel rank.
  uint64_t sample_offset = 0;
  DType compute_dtype = DType::f32;  // activations and the weights' compute copy
  Context* ctx = &cpu_context();     // device, stream, scratch arena for the ops
  GradientWatch* grad_watch = nullptr;  // set on a step's last micro-batch only
  // Whether models may capture their host-free stretches of ops as graphs and replay them
  // (nn/graphed_region.h): the training loop's choice (train/update_graph.h).
  bool capture_regions = false;
  // sample_offset again, as one i64 on ctx's device, which the dropout ops read when they run:
  // a replayed graph (backend/graph.h) then takes each micro-batch's offset. The training loop
  // sets it; a step on the host may leave it empty (the layer then passes its own copy).
  Tensor sample_offset_tensor{};

  // Models call this in backward, in order of decreasing offsets.
  void grads_final_from(int64_t offset) const {
    if (grad_watch) grad_watch->final_from(offset);
  }
};

}  // namespace kiln
