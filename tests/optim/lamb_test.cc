#include "kiln/optim/lamb.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kiln/core/error.h"
#include "optim_test_util.h"

namespace kiln::optim {
namespace {

// Straightforward float64 LAMB on one parameter (the MLPerf reference rule).
struct RefLamb {
  std::vector<double> m, v;
  void step(std::vector<double>& w, const std::vector<double>& g, int t, double lr, double wd, const LambConfig& c) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0);
    std::vector<double> u(w.size());
    double wn = 0, un = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = c.beta1 * m[i] + (1 - double(c.beta1)) * g[i];
      v[i] = c.beta2 * v[i] + (1 - double(c.beta2)) * g[i] * g[i];
      const double mh = m[i] / (1 - std::pow(double(c.beta1), t));
      const double vh = v[i] / (1 - std::pow(double(c.beta2), t));
      u[i] = mh / (std::sqrt(vh) + c.eps) + wd * w[i];
      wn += w[i] * w[i];
      un += u[i] * u[i];
    }
    const double r = (wn > 0 && un > 0) ? std::sqrt(wn) / std::sqrt(un) : 1.0;
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * r * u[i];
  }
};

TEST(Lamb, MatchesFloat64ReferenceOverThreeSteps) {
  ParamStore store;
  test::make_store(store);
  LambConfig cfg;
  cfg.weight_decay = 0.1f;  // large enough that dropping it would show
  Lamb lamb(store, cfg);
  const double lr = 0.05;

  std::vector<std::vector<double>> ref_w;
  std::vector<RefLamb> ref(store.specs().size());
  for (const ParamSpec& s : store.specs()) ref_w.push_back(test::to_double(store.host_values().data() + s.offset, s.numel));

  for (int t = 1; t <= 3; ++t) {
    test::fill_grads(store, t);
    for (size_t p = 0; p < store.specs().size(); ++p) {
      const ParamSpec& s = store.specs()[p];
      ref[p].step(ref_w[p], test::to_double(store.host_grads().data() + s.offset, s.numel), t, lr,
                  s.decay ? cfg.weight_decay : 0.0, cfg);
    }
    lamb.step(float(lr));
    for (size_t p = 0; p < store.specs().size(); ++p) {
      const ParamSpec& s = store.specs()[p];
      for (int64_t i = 0; i < s.numel; ++i)
        EXPECT_NEAR(store.host_values()[size_t(s.offset + i)], ref_w[p][size_t(i)], 2e-6)
            << s.name << "[" << i << "] step " << t;
    }
  }
  EXPECT_EQ(lamb.steps_taken(), 3);
}

TEST(Lamb, FirstStepMovesEachNonZeroParamByLrTimesItsNorm) {
  ParamStore store;
  test::make_store(store);
  test::fill_grads(store, 1);
  const std::vector<float> before = store.values_vector();
  Lamb lamb(store);
  const float lr = 0.01f;
  lamb.step(lr);
  // Trust ratio: ‖Δw‖ = lr·‖w‖ for a non-zero parameter; the all-zero bias takes ratio 1 and moves by
  // lr·u with |u| ≈ 1 per element on the first step (m̂ = g, v̂ = g²).
  const ParamSpec& w = store.specs()[0];
  double dn = 0, wn = 0;
  for (int64_t i = w.offset; i < w.offset + w.numel; ++i) {
    dn += std::pow(double(store.host_values()[size_t(i)]) - before[size_t(i)], 2);
    wn += std::pow(double(before[size_t(i)]), 2);
  }
  EXPECT_NEAR(std::sqrt(dn), lr * std::sqrt(wn), 1e-6);
  const ParamSpec& b = store.specs()[1];
  for (int64_t i = b.offset; i < b.offset + b.numel; ++i) {
    const float g = store.host_grads()[size_t(i)];
    EXPECT_NEAR(store.host_values()[size_t(i)], -lr * g / (std::fabs(g) + 1e-6f), 1e-7);
  }
}

// A norm reduction that reports ‖w‖ twice as large (as if another rank held an equal part of the
// weight) doubles the weight's trust ratio, and so its step; the all-zero bias keeps ratio 1.
TEST(Lamb, TrustRatiosUseTheReducedNorms) {
  ParamStore plain, reduced;
  for (ParamStore* store : {&plain, &reduced}) {
    test::make_store(*store);
    test::fill_grads(*store, 1);
  }
  const std::vector<float> before = plain.values_vector();
  Lamb a(plain), b(reduced);
  int calls = 0;
  b.set_norm_reduction([&](Tensor& norms) {
    ++calls;
    ASSERT_EQ(norms.shape, (Shape{2, 2}));
    Tensor sums = Tensor::view(norms.data, norms.shape, DType::f64);
    sums.ptr<double>()[0] *= 4;  // Σ w² of dense.weight
  });
  a.step(0.01f);
  b.step(0.01f);
  EXPECT_EQ(calls, 1);
  const ParamSpec& w = plain.specs()[0];
  for (int64_t i = w.offset; i < w.offset + w.numel; ++i) {
    const double d_plain = double(plain.host_values()[size_t(i)]) - before[size_t(i)];
    const double d_reduced = double(reduced.host_values()[size_t(i)]) - before[size_t(i)];
    EXPECT_NEAR(d_reduced, 2 * d_plain, 1e-7) << "dense.weight[" << i - w.offset << "]";
  }
  const ParamSpec& bias = plain.specs()[1];
  for (int64_t i = bias.offset; i < bias.offset + bias.numel; ++i)
    EXPECT_EQ(reduced.host_values()[size_t(i)], plain.host_values()[size_t(i)]);
}

TEST(Lamb, ZeroGradientOnNoDecayParamLeavesItUnchanged) {
  ParamStore store;
  test::make_store(store);
  const ParamSpec& b = store.specs()[1];
  for (int64_t i = 0; i < b.numel; ++i) store.host_values()[size_t(b.offset + i)] = 1.0f + float(i);
  Lamb lamb(store);
  lamb.step(0.1f);  // grads are zero: u = 0 on the bias, ratio 1, no change
  for (int64_t i = 0; i < b.numel; ++i) EXPECT_EQ(store.host_values()[size_t(b.offset + i)], 1.0f + float(i));
}

// Runs `steps` LAMB steps from a fresh store; the weight has more than one reduction chunk.
std::vector<float> run_lamb(int steps, int threads) {
  omp_set_num_threads(threads);
  ParamStore store;
  test::make_store(store, 20000);
  Lamb lamb(store);
  for (int t = 1; t <= steps; ++t) {
    test::fill_grads(store, t);
    lamb.step(0.01f);
  }
  return store.values_vector();
}

TEST(Lamb, IsBitwiseDeterministicAcrossThreadCounts) {
  const int saved = omp_get_max_threads();
  const std::vector<float> a = run_lamb(3, 1), b = run_lamb(3, 4), c = run_lamb(3, 4);
  omp_set_num_threads(saved);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b.data(), c.data(), b.size() * sizeof(float)), 0);
}

TEST(Lamb, ResumeFromSavedStateIsBitwiseIdentical) {
  ParamStore full;
  test::make_store(full);
  Lamb full_opt(full);
  for (int t = 1; t <= 5; ++t) {
    test::fill_grads(full, t);
    full_opt.step(0.02f);
  }

  ParamStore first;
  test::make_store(first);
  Lamb first_opt(first);
  for (int t = 1; t <= 2; ++t) {
    test::fill_grads(first, t);
    first_opt.step(0.02f);
  }
  // "Checkpoint": weights, every named state buffer and the step counter.
  const std::vector<float> saved_values = first.values_vector();
  std::vector<std::pair<std::string, std::vector<float>>> saved_state;
  for (const NamedState& s : first_opt.state()) saved_state.emplace_back(s.name, to_float_vector(*s.data));
  const int64_t saved_steps = first_opt.steps_taken();

  ParamStore resumed;
  test::make_store(resumed);
  std::copy(saved_values.begin(), saved_values.end(), resumed.host_values().begin());
  Lamb resumed_opt(resumed);
  auto state = resumed_opt.state();
  ASSERT_EQ(state.size(), saved_state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].name, saved_state[i].first);
    std::copy(saved_state[i].second.begin(), saved_state[i].second.end(), state[i].data->ptr<float>());
  }
  resumed_opt.set_steps_taken(saved_steps);
  for (int t = 3; t <= 5; ++t) {
    test::fill_grads(resumed, t);
    resumed_opt.step(0.02f);
  }
  EXPECT_EQ(std::memcmp(full.host_values().data(), resumed.host_values().data(), full.host_values().size() * sizeof(float)), 0);
  auto full_state = full_opt.state();
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_EQ(to_float_vector(*state[i].data), to_float_vector(*full_state[i].data)) << state[i].name;
}

TEST(Lamb, RestoredStateOfWrongSizeIsRejected) {
  ParamStore store;
  test::make_store(store);
  Lamb lamb(store);
  *lamb.state()[0].data = Tensor::zeros({3});
  EXPECT_THROW(lamb.step(0.1f), Error);
  ParamStore unallocated;
  EXPECT_THROW(Lamb{unallocated}, Error);
}

}  // namespace
}  // namespace kiln::optim
