// optim/lars.h — LARS as in the MLPerf ResNet-50 reference (MLPERF_LARSOptimizer / MXNet
// SGDwFASTLARS, tinygrad's LARS), over the flat buffers. Per parameter w with gradient g:
//   spec.decay (conv and fc weights):
//     r = eeta·‖w‖ / (‖g‖ + wd·‖w‖ + epsilon)   if ‖w‖ > 0 and ‖g‖ > 0, else 1   (raw g)
//     v = momentum·v + lr·r·(g + wd·w)
//   otherwise (the skip list: BN gamma/beta and biases): plain momentum SGD, no decay
//     v = momentum·v + lr·g
//   w -= v
// v starts at zero. Norms are whole-parameter L2 norms accumulated in double.
// (TensorFlow's reference applies lr·r outside the accumulator, v = m·v + g'; w -= lr·r·v; the two
// agree while lr·r is constant. This is the form tinygrad and MXNet use.)
#pragma once
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct LarsConfig {
  float momentum = 0.9f;
  float weight_decay = 2e-4f;  // MLPerf allows 1e-4·2^N; tinygrad's DECAY default
  float eeta = 0.001f;         // trust coefficient
  float epsilon = 0.0f;
};

class Lars : public Optimizer {
 public:
  // The store must be allocated; the momentum buffer starts at zero.
  Lars(ParamStore& store, LarsConfig config = {}, Context& ctx = cpu_context(), ShardRange shard = {});
  void update(const Tensor& scalars) override;
  std::vector<NamedState> state() override;  // "momentum"
  const LarsConfig& config() const { return config_; }

 private:
  LarsConfig config_;
  Tensor momentum_;  // (store.size())
  Tensor norms_;  // (parameters, 2) f64 in i64: per-parameter sums of squares
};

}  // namespace kiln::optim
