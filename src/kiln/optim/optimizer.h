// optim/optimizer.h — the optimizer interface over a ParamStore's flat buffers. Every state vector
// (m, v, ...) has the store's layout, so a parameter's state is the same slice as its weights.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/nn/params.h"
#include "kiln/optim/step_scalars.h"

namespace kiln::optim {

// 1 - beta^t for step t (counted from 1), computed in double and rounded to fp32.
inline float adam_bias_correction(float beta, double t) { return float(1.0 - std::pow(double(beta), t)); }

// One state buffer for checkpoints; `data` points into the optimizer and has the shard's size
// (ParamStore::size() when not sharded). Restoring = overwrite *data, then set_steps_taken().
struct NamedState {
  std::string name;
  Tensor* data;  // (store.size()) f32
};

// The slice of the store's flat buffers that an optimizer updates: all of it, or one data-parallel
// rank's shard (ZeRO-1: `--use-distributed-optimizer`), whose state buffers then hold only it.
struct ShardRange {
  int64_t begin = 0;
  int64_t size = -1;  // -1: to the end of the store
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Enqueues one update of store.values from store.grads, and of the weights' compute copy
  // (store.compute, bf16/f16) in the same fused pass, with the step's values from the step's
  // scalars `scalars` on the device (backend.h, StepScalar): the learning rate, the bias
  // corrections set_inputs wrote, the gradient factor (clipping without a pass of its own: the
  // gradients count as factor·g; Adam and LAMB leave them untouched) and the skip flag, with which
  // it changes nothing. It does not count the step: count_step() does, once the host has read the
  // step's decision back.
  virtual void update(const Tensor& scalars) = 0;
  // This optimizer's inputs to its next step (Adam's bias corrections for step steps_taken() + 1).
  virtual void set_inputs(StepInputs& in) const { (void)in; }
  void count_step() { ++steps_taken_; }
  // One counted step with host values, never skipped (tests, tools): update() through a block
  // of its own holding lr, this optimizer's inputs and the gradient factor grad_scale.
  void step(float lr, float grad_scale = 1.0f);
  // Number of counted steps so far (restored from a checkpoint by set_steps_taken).
  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps);
  // All state buffers, in a fixed order, for save and restore.
  virtual std::vector<NamedState> state() = 0;
  // Trust-ratio optimizers (LAMB, LARS) on ranks that hold parts of a parameter (tensor parallel,
  // sharded optimizer state): `reduce` receives the per-parameter partial sums of squares
  // (parameters, 2) f64 stored as i64 (view them as DType::f64) and must turn them into the
  // whole parameters' sums, identical on the ranks sharing a parameter. Called between the passes.
  void set_norm_reduction(std::function<void(Tensor& norms)> reduce) { reduce_norms_ = std::move(reduce); }

 protected:
  // Ops run on ctx, which must be the device of the store's buffers. Throws unless the store is
  // allocated and the shard lies within its padded buffers.
  Optimizer(ParamStore& store, Context& ctx, ShardRange shard);
  // A zeroed f32 state buffer with the shard's layout, on the store's device.
  Tensor zeros_like_store();

  // The shard's view of the store: every parameter's segment clipped to it (offsets from the
  // shard's start; empty for parameters outside it, so norms keep one row per parameter), and
  // the gradients over it.
  struct Flat {
    std::vector<ops::TensorSegment> segments;
    Tensor grads;
    int64_t begin = 0, size = 0;
  };
  // The master weights (ParamStore::master()) and compute copy over the shard, taken at each
  // update: the loop splits the master weights after the optimizer is made.
  Tensor master() const { return store_.master().slice_rows(flat_.begin, flat_.begin + flat_.size); }
  Tensor compute() const;

  ParamStore& store_;
  Context& ctx_;
  Flat flat_;
  int64_t steps_taken_ = 0;
  std::function<void(Tensor& norms)> reduce_norms_;
};

}  // namespace kiln::optim
