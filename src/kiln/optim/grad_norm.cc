#include "kiln/optim/grad_norm.h"

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/optim/reduce.h"

namespace kiln::optim {

double global_grad_norm(const ParamStore& store) {
  double total = 0.0;
  for (const ParamSpec& spec : store.specs()) total += sum_squares(store.grads.ptr<float>() + spec.offset, spec.numel);
  return std::sqrt(total);
}

double clip_grad_norm(ParamStore& store, double max_norm) {
  KILN_CHECK(max_norm > 0.0, "gradient clipping: max norm {} must be positive", max_norm);
  const double norm = global_grad_norm(store);
  if (norm > max_norm) scale_grads(store, float(max_norm / norm));
  return norm;
}

void scale_grads(ParamStore& store, float factor) {
  float* g = store.grads.ptr<float>();
  const int64_t n = store.grads.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) g[i] *= factor;
}

}  // namespace kiln::optim
