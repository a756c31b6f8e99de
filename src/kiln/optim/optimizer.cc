#include "kiln/optim/optimizer.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln::optim {

Optimizer::Optimizer(ParamStore& store, Context& ctx, ShardRange shard)
    : store_(store), ctx_(ctx) {
  KILN_CHECK(store.allocated(), "optimizer: the parameter store is not allocated");
  const int64_t begin = shard.begin, size = shard.size < 0 ? store.size() - begin : shard.size;
  KILN_CHECK(begin >= 0 && size >= 0 && begin + size <= store.padded_size(),
             "optimizer shard [{}, {}) outside the parameter store's {} elements", begin, begin + size,
             store.padded_size());
  for (const ops::TensorSegment& s : store.segments()) {
    const int64_t lo = std::clamp(s.offset, begin, begin + size);
    const int64_t hi = std::clamp(s.offset + s.numel, begin, begin + size);
    flat_.segments.push_back({lo - begin, hi - lo, s.decay});
  }
  flat_.grads = store.grads.slice_rows(begin, begin + size);
  flat_.begin = begin;
  flat_.size = size;
}

Tensor Optimizer::compute() const {
  return store_.compute.defined() ? store_.compute.slice_rows(flat_.begin, flat_.begin + flat_.size) : Tensor{};
}

Tensor Optimizer::zeros_like_store() {
  Tensor t = Tensor::empty({flat_.size}, DType::f32, ctx_.device);
  ops::fill(ctx_, t, 0.0f);
  return t;
}

void Optimizer::step(float lr, float grad_scale) {
  StepInputs in;
  in.lr = lr;
  set_inputs(in);
  StepScalars scalars(ctx_);
  scalars.write(in, grad_scale);
  update(scalars.device());
  count_step();
}

void Optimizer::set_steps_taken(int64_t steps) {
  KILN_CHECK(steps >= 0, "optimizer step counter: {} is negative", steps);
  steps_taken_ = steps;
}

}  // namespace kiln::optim
