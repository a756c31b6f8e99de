// tests/nn/grad_check.h — finite-difference gradient checks for layers.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/tensor.h"
#include "../backend/random_fill.h"

namespace kiln::testing {

// One tensor whose gradient is checked: its values (perturbed in place) and the analytic grad.
struct GradTarget {
  std::string name;
  float* value;
  std::vector<float> grad;  // a copy: layer buffers may be reused
};

inline GradTarget param_target(const Param& p) {
  return {p.spec().name, p.w(), std::vector<float>(p.g(), p.g() + p.numel())};
}

inline GradTarget tensor_target(std::string name, Tensor& x, const Tensor& grad) {
  return {std::move(name), x.ptr<float>(),
          std::vector<float>(grad.ptr<float>(), grad.ptr<float>() + grad.numel())};
}

// Sum of y * r in float64: a scalar loss whose gradient with respect to y is r.
inline double weighted_sum(const Tensor& y, const std::vector<float>& r) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += double(y.ptr<float>()[i]) * r[size_t(i)];
  return s;
}

// The worst relative disagreement between central differences of `loss` (step h, on up to
// `samples` elements per target) and the analytic gradients. An element's error is
// |fd - g| / (|g| + 0.01 max|g|), so tiny components cannot dominate through rounding noise.
inline double max_grad_error(const std::function<double()>& loss,
                             const std::vector<GradTarget>& targets, float h = 1e-2f,
                             int samples = 24, std::string* worst = nullptr) {
  double max_err = 0;
  for (const auto& t : targets) {
    const int64_t n = int64_t(t.grad.size());
    double gmax = 0;
    for (float g : t.grad) gmax = std::max(gmax, double(std::abs(g)));
    for (int64_t k = 0; k < std::min<int64_t>(n, samples); ++k) {
      const int64_t i = n <= samples ? k : (k * 7919) % n;  // spread samples over the tensor
      const float saved = t.value[i];
      t.value[i] = saved + h;
      const double up = loss();
      t.value[i] = saved - h;
      const double down = loss();
      t.value[i] = saved;
      const double fd = (up - down) / (2.0 * double(h));
      const double g = t.grad[size_t(i)];
      const double err = std::abs(fd - g) / (std::abs(g) + 0.01 * gmax + 1e-6);
      if (err > max_err) {
        max_err = err;
        if (worst) *worst = t.name + "[" + std::to_string(i) + "] fd=" + std::to_string(fd) +
                            " analytic=" + std::to_string(g);
      }
    }
  }
  return max_err;
}

// Fills every parameter with N(0, scale^2); LayerNorm-style weights (names ending in
// "LayerNorm.weight") get 1 + N(0, 0.1^2).
inline void randomize_params(ParamStore& store, uint32_t id, float scale) {
  for (const auto& s : store.specs()) {
    const auto v = random_normal(s.numel, id++, scale);
    const bool ln_weight = s.name.size() >= 16 &&
                           s.name.compare(s.name.size() - 16, 16, "LayerNorm.weight") == 0;
    for (int64_t i = 0; i < s.numel; ++i)
      store.host_values()[size_t(s.offset + i)] = ln_weight ? 1.0f + 0.1f * v[size_t(i)] / scale
                                                     : v[size_t(i)];
  }
}

inline Tensor random_tensor(Shape shape, uint32_t id, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape);
  const auto v = random_normal(t.numel(), id, scale);
  std::copy(v.begin(), v.end(), t.ptr<float>());
  return t;
}

}  // namespace kiln::testing
