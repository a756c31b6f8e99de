#include "kiln/optim/optimizer.h"

#include "kiln/core/error.h"

namespace kiln::optim {

Optimizer::Optimizer(ParamStore& store, Context& ctx)
    : store_(store), ctx_(ctx) {}

Tensor Optimizer::zeros_like_store() {
  Tensor t = Tensor::empty({store_.size()}, DType::f32, ctx_.device);
  ops::fill(ctx_, t, 0.0f);
  return t;
}

void Optimizer::set_steps_taken(int64_t steps) {
  KILN_CHECK(steps >= 0, "optimizer step counter: {} is negative", steps);
  steps_taken_ = steps;
}

void Optimizer::check_layout() {
  KILN_CHECK(store_.allocated(), "optimizer: the parameter store is not allocated");
  for (const NamedState& s : state()) {
    KILN_CHECK(s.data->numel() == store_.size(),
               "optimizer state '{}' has {} elements, the parameter store {}", s.name,
               s.data->numel(), store_.size());
  }
}

}  // namespace kiln::optim
