// optim/lamb.h — LAMB as in the MLPerf BERT reference (tinygrad LAMB(adam=False)), over the flat
// buffers. Per parameter w with gradient g, at step t = 1, 2, ...:
//   m = b1·m + (1-b1)·g            v = b2·v + (1-b2)·g²
//   m̂ = m/(1-b1^t)                 v̂ = v/(1-b2^t)          (when bias_correction)
//   u = m̂/(sqrt(v̂)+eps) + wd·w     (wd only where spec.decay)
//   r = ‖w‖/‖u‖ (1 if either is 0), for decay and no-decay parameters alike
//   w -= lr·r·u
// Norms are whole-parameter L2 norms accumulated in double.
#pragma once
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct LambConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-6f;
  float weight_decay = 0.01f;
  bool bias_correction = true;
};

class Lamb : public Optimizer {
 public:
  // The store must be allocated; m and v start at zero.
  Lamb(ParamStore& store, LambConfig config = {}, Context& ctx = cpu_context(), ShardRange shard = {});
  void update(const Tensor& scalars) override;
  void set_inputs(StepInputs& in) const override;
  std::vector<NamedState> state() override;  // "m", "v"
  const LambConfig& config() const { return config_; }

 private:
  LambConfig config_;
  Tensor m_, v_;  // (store.size())
  Tensor norms_;  // (parameters, 2) f64 in i64: per-parameter sums of squares
};

}  // namespace kiln::optim
