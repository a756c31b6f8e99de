#include "kiln/optim/adamw.h"

#include <cmath>

#include "kiln/core/error.h"

namespace kiln::optim {

AdamW::AdamW(ParamStore& store, AdamWConfig config) : Optimizer(store), config_(config) {
  KILN_CHECK(store.allocated(), "AdamW: the parameter store is not allocated");
  m_.assign(size_t(store.size()), 0.0f);
  v_.assign(size_t(store.size()), 0.0f);
}

std::vector<NamedState> AdamW::state() { return {{"m", &m_}, {"v", &v_}}; }

void AdamW::step(float lr) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float bc1 = float(1.0 - std::pow(double(b1), t));
  const float bc2 = float(1.0 - std::pow(double(b2), t));

  for (const ParamSpec& spec : store_.specs()) {
    float* w = store_.values.data() + spec.offset;
    const float* g = store_.grads.data() + spec.offset;
    float* m = m_.data() + spec.offset;
    float* v = v_.data() + spec.offset;
    const float wd = spec.decay ? config_.weight_decay : 0.0f;
#pragma omp parallel for schedule(static) if (spec.numel > (1 << 14))
    for (int64_t i = 0; i < spec.numel; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      w[i] -= lr * ((m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps) + wd * w[i]);
    }
  }
  ++steps_taken_;
}

}  // namespace kiln::optim
