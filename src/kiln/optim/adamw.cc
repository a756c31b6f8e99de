#include "kiln/optim/adamw.h"

#include "kiln/core/error.h"
#include "kiln/optim/adam_update.h"

namespace kiln::optim {

AdamW::AdamW(ParamStore& store, AdamWConfig config) : Optimizer(store), config_(config) {
  KILN_CHECK(store.allocated(), "AdamW: the parameter store is not allocated");
  m_ = Tensor::zeros({store.size()});
  v_ = Tensor::zeros({store.size()});
}

std::vector<NamedState> AdamW::state() { return {{"m", &m_}, {"v", &v_}}; }

void AdamW::step(float lr) {
  check_layout();
  const double t = double(steps_taken_ + 1);
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float bc1 = adam_bias_correction(b1, t);
  const float bc2 = adam_bias_correction(b2, t);

  for (const ParamSpec& spec : store_.specs()) {
    float* w = store_.values.ptr<float>() + spec.offset;
    const float* g = store_.grads.ptr<float>() + spec.offset;
    float* m = m_.ptr<float>() + spec.offset;
    float* v = v_.ptr<float>() + spec.offset;
    const float wd = spec.decay ? config_.weight_decay : 0.0f;
#pragma omp parallel for schedule(static) if (spec.numel > (1 << 14))
    for (int64_t i = 0; i < spec.numel; ++i) {
      adam_moments(g[i], b1, b2, m[i], v[i]);
      w[i] -= lr * adam_direction(m[i], v[i], w[i], bc1, bc2, eps, wd);
    }
  }
  ++steps_taken_;
}

}  // namespace kiln::optim
