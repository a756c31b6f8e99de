#include "kiln/optim/lamb.h"

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/optim/adam_update.h"
#include "kiln/optim/reduce.h"

namespace kiln::optim {

Lamb::Lamb(ParamStore& store, LambConfig config) : Optimizer(store), config_(config) {
  KILN_CHECK(store.allocated(), "LAMB: the parameter store is not allocated");
  m_ = Tensor::zeros({store.size()});
  v_ = Tensor::zeros({store.size()});
}

std::vector<NamedState> Lamb::state() { return {{"m", &m_}, {"v", &v_}}; }

void Lamb::step(float lr) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float bc1 = config_.bias_correction ? adam_bias_correction(b1, t) : 1.0f;
  const float bc2 = config_.bias_correction ? adam_bias_correction(b2, t) : 1.0f;

  for (const ParamSpec& spec : store_.specs()) {
    float* w = store_.values.ptr<float>() + spec.offset;
    const float* g = store_.grads.ptr<float>() + spec.offset;
    float* m = m_.ptr<float>() + spec.offset;
    float* v = v_.ptr<float>() + spec.offset;
    const float wd = spec.decay ? config_.weight_decay : 0.0f;
    auto update = [=](int64_t i) { return adam_direction(m[i], v[i], w[i], bc1, bc2, eps, wd); };

    // Pass 1: moments, and ‖w‖², ‖u‖² before w changes.
    const SumPair sq = deterministic_sum<SumPair>(spec.numel, [&](int64_t i) {
      adam_moments(g[i], b1, b2, m[i], v[i]);
      const float u = update(i);
      return SumPair{double(w[i]) * double(w[i]), double(u) * double(u)};
    });
    const double w_norm = std::sqrt(sq.a), u_norm = std::sqrt(sq.b);
    const double ratio = (w_norm > 0.0 && u_norm > 0.0) ? w_norm / u_norm : 1.0;

    // Pass 2: u is recomputed from the same m, v, w rather than stored.
    const float scale = float(double(lr) * ratio);
#pragma omp parallel for schedule(static) if (spec.numel > kReduceChunk)
    for (int64_t i = 0; i < spec.numel; ++i) w[i] -= scale * update(i);
  }
  ++steps_taken_;
}

}  // namespace kiln::optim
