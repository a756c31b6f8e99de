// optim/adamw.h — AdamW as Megatron's fused Adam in decoupled mode (= PyTorch AdamW), over the flat
// buffers. Per parameter w with gradient g, at step t = 1, 2, ...:
//   m = b1·m + (1-b1)·g     v = b2·v + (1-b2)·g²     m̂ = m/(1-b1^t)     v̂ = v/(1-b2^t)
//   w -= lr·(m̂/(sqrt(v̂)+eps) + wd·w)                 (wd only where spec.decay)
#pragma once
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

class AdamW : public Optimizer {
 public:
  // The store must be allocated; m and v start at zero.
  AdamW(ParamStore& store, AdamWConfig config = {}, Context& ctx = cpu_context(), ShardRange shard = {});
  void update(const Tensor& scalars) override;
  void set_inputs(StepInputs& in) const override;
  std::vector<NamedState> state() override;  // "m", "v"
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  Tensor m_, v_;  // (store.size())
};

}  // namespace kiln::optim
