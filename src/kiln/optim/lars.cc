#include "kiln/optim/lars.h"

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/optim/reduce.h"

namespace kiln::optim {

Lars::Lars(ParamStore& store, LarsConfig config) : Optimizer(store), config_(config) {
  KILN_CHECK(store.allocated(), "LARS: the parameter store is not allocated");
  momentum_ = Tensor::zeros({store.size()});
}

std::vector<NamedState> Lars::state() { return {{"momentum", &momentum_}}; }

void Lars::step(float lr) {
  check_layout();
  const float mom = config_.momentum;
  for (const ParamSpec& spec : store_.specs()) {
    float* w = store_.values.ptr<float>() + spec.offset;
    const float* g = store_.grads.ptr<float>() + spec.offset;
    float* v = momentum_.ptr<float>() + spec.offset;
    const float wd = spec.decay ? config_.weight_decay : 0.0f;
    float scale = lr;  // lr·r
    if (spec.decay) {
      const SumPair sq = deterministic_sum<SumPair>(spec.numel, [&](int64_t i) {
        return SumPair{double(w[i]) * double(w[i]), double(g[i]) * double(g[i])};
      });
      const double w_norm = std::sqrt(sq.a), g_norm = std::sqrt(sq.b);
      const double ratio =
          w_norm > 0.0 && g_norm > 0.0
              ? double(config_.eeta) * w_norm /
                    (g_norm + double(wd) * w_norm + double(config_.epsilon))
              : 1.0;
      scale = float(double(lr) * ratio);
    }
#pragma omp parallel for simd schedule(static) if (spec.numel > kReduceChunk)
    for (int64_t i = 0; i < spec.numel; ++i) {
      v[i] = mom * v[i] + scale * (g[i] + wd * w[i]);
      w[i] -= v[i];
    }
  }
  ++steps_taken_;
}

}  // namespace kiln::optim
