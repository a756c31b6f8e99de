#include "kiln/optim/adamw.h"
#include "kiln/backend/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "optim_test_util.h"

namespace kiln::optim {
namespace {

TEST(AdamW, MatchesFloat64ReferenceOverThreeSteps) {
  ParamStore store;
  test::make_store(store);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1f;
  AdamW adam(store, cfg);
  const double lr = 0.01;

  // Reference: PyTorch AdamW order (decoupled decay first, then the Adam update with eps outside sqrt).
  std::vector<double> w = test::to_double(store.host_values().data(), store.size());
  std::vector<double> m(w.size(), 0.0), v(w.size(), 0.0);
  for (int t = 1; t <= 3; ++t) {
    test::fill_grads(store, t);
    for (const ParamSpec& s : store.specs()) {
      const double wd = s.decay ? cfg.weight_decay : 0.0;
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
        const double g = store.host_grads()[size_t(i)];
        const size_t k = size_t(i);
        w[k] -= lr * wd * w[k];
        m[k] = cfg.beta1 * m[k] + (1 - double(cfg.beta1)) * g;
        v[k] = cfg.beta2 * v[k] + (1 - double(cfg.beta2)) * g * g;
        const double denom = std::sqrt(v[k]) / std::sqrt(1 - std::pow(double(cfg.beta2), t)) + cfg.eps;
        w[k] -= lr / (1 - std::pow(double(cfg.beta1), t)) * m[k] / denom;
      }
    }
    adam.step(float(lr));
    for (const ParamSpec& s : store.specs())
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i)
        EXPECT_NEAR(store.host_values()[size_t(i)], w[size_t(i)], 1e-6) << s.name << " step " << t;
  }
}

TEST(AdamW, NoDecayParamWithZeroGradientStaysPut) {
  ParamStore store;
  test::make_store(store);
  const ParamSpec& wspec = store.specs()[0];
  const ParamSpec& b = store.specs()[1];
  for (int64_t i = 0; i < b.numel; ++i) store.host_values()[size_t(b.offset + i)] = 2.0f;
  const float w0 = store.host_values()[size_t(wspec.offset)];
  AdamW adam(store, AdamWConfig{.weight_decay = 0.5f});
  adam.step(0.1f);
  for (int64_t i = 0; i < b.numel; ++i) EXPECT_EQ(store.host_values()[size_t(b.offset + i)], 2.0f);
  // The decay parameter shrinks by lr·wd even with zero gradients.
  EXPECT_NEAR(store.host_values()[size_t(wspec.offset)], w0 * (1 - 0.1f * 0.5f), 1e-7);
}

TEST(AdamW, ResumeFromSavedStateIsBitwiseIdentical) {
  auto run = [](ParamStore& store, AdamW& opt, int from, int to) {
    for (int t = from; t <= to; ++t) {
      test::fill_grads(store, t);
      opt.step(0.003f);
    }
  };
  ParamStore full;
  test::make_store(full);
  AdamW full_opt(full);
  run(full, full_opt, 1, 4);

  ParamStore first;
  test::make_store(first);
  AdamW first_opt(first);
  run(first, first_opt, 1, 2);

  ParamStore resumed;
  test::make_store(resumed);
  ops::cast(cpu_context(), first.values, resumed.values);
  AdamW resumed_opt(resumed);
  auto src = first_opt.state(), dst = resumed_opt.state();
  for (size_t i = 0; i < src.size(); ++i) ops::cast(cpu_context(), *src[i].data, *dst[i].data);
  resumed_opt.set_steps_taken(first_opt.steps_taken());
  run(resumed, resumed_opt, 3, 4);
  EXPECT_EQ(std::memcmp(full.host_values().data(), resumed.host_values().data(), full.host_values().size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace kiln::optim
