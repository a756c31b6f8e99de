// LARS (optim/lars.h) against a float64 transcription of the MLPerf reference, and the ResNet LR
// schedule (PolyWarmupSchedule) against the reference's formula.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/optim/lars.h"
#include "kiln/optim/lr_schedule.h"
#include "optim_test_util.h"

namespace kiln::optim {
namespace {

TEST(Lars, MatchesFloat64ReferenceForThreeSteps) {
  ParamStore store;
  store.add("layer1.0.conv1.weight", {4, 3, 1, 1}, true);  // LARS with decay
  store.add("fc.weight", {3, 5}, true);                    // starts at 0: ratio 1
  store.add("bn1.weight", {6}, false);                     // momentum SGD, no decay
  store.allocate();
  const RngStream rng{3, rng_stream(RngPurpose::test, 9, 0)};
  for (int64_t i = 0; i < 12; ++i) store.host_values()[i] = rng.normal(uint64_t(i));
  const ParamSpec& bn = *store.find("bn1.weight");
  for (int64_t i = 0; i < 6; ++i) store.host_values()[bn.offset + i] = 1.0f + 0.1f * rng.normal(100 + i);

  LarsConfig cfg;
  cfg.weight_decay = 0.05f;  // large enough that the decay terms matter
  Lars lars(store, cfg);
  std::vector<double> w(store.host_values().begin(), store.host_values().end()), v(w.size(), 0.0);
  const double lrs[3] = {0.0, 2.0, 1.5};  // the schedule's first step is lr 0
  for (int t = 0; t < 3; ++t) {
    test::fill_grads(store, t);
    if (t == 0)  // a zero gradient: ratio 1 branch
      for (int64_t i = 0; i < 12; ++i) store.host_grads()[i] = 0.0f;
    for (const ParamSpec& s : store.specs()) {
      const double wd = s.decay ? cfg.weight_decay : 0.0;
      double wn = 0, gn = 0;
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
        wn += w[i] * w[i];
        gn += double(store.host_grads()[i]) * store.host_grads()[i];
      }
      wn = std::sqrt(wn);
      gn = std::sqrt(gn);
      const double r = s.decay && wn > 0 && gn > 0 ? 0.001 * wn / (gn + wd * wn) : 1.0;
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
        v[i] = 0.9 * v[i] + lrs[t] * r * (store.host_grads()[i] + wd * w[i]);
        w[i] -= v[i];
      }
    }
    lars.step(float(lrs[t]));
    for (int64_t i = 0; i < store.size(); ++i) {
      const double tol = 1e-6 * std::max(1.0, std::abs(w[i]));
      ASSERT_NEAR(store.host_values()[i], w[i], tol) << "step " << t << " element " << i;
    }
  }
  // The updates are not trivial: fc moved by the plain-ratio step, conv by a trust-scaled one.
  EXPECT_NE(store.host_values()[store.find("fc.weight")->offset], 0.0f);
  EXPECT_EQ(lars.steps_taken(), 3);
  const auto state = lars.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].name, "momentum");
  EXPECT_EQ(state[0].data->numel(), store.size());
  for (int64_t i = 0; i < store.size(); ++i)
    EXPECT_NEAR(state[0].data->ptr<float>()[i], v[i], 1e-6 * std::max(1.0, std::abs(v[i])));
}

TEST(Lars, ThrowsOnUnallocatedStore) {
  ParamStore store;
  store.add("w", {3}, true);
  EXPECT_THROW({ Lars lars(store); }, Error);
}

// The MLPerf ResNet reference (TF lars_util.poly_rate_schedule): warmup lr·step/W, then
// tf.train.polynomial_decay(lr, step - W, decay_steps = T - W + 1, end 1e-4, power 2).
TEST(Lars, PolyWarmupScheduleMatchesResNetReference) {
  const double lr0 = 7.2, end = 1e-4;
  const int64_t W = 1670, T = 30895;  // tinygrad's BS 1536: 2 and 37 epochs of 835 steps
  const PolyWarmupSchedule sched(lr0, W, T, 2.0, end);
  for (int64_t step : {int64_t(0), int64_t(1), int64_t(835), W, W + 1, int64_t(15000), T - 1, T,
                       T + 1, T + 50}) {
    double want;
    if (step <= W) {
      want = lr0 * double(step) / double(W);
    } else {
      const double decay_steps = double(T - W + 1);
      const double s = std::min(double(step - W), decay_steps);
      want = (lr0 - end) * std::pow(1.0 - s / decay_steps, 2.0) + end;
    }
    EXPECT_NEAR(sched.lr(step), want, 1e-12) << "step " << step;
  }
  EXPECT_EQ(sched.lr(0), 0.0);
  EXPECT_NEAR(sched.lr(T + 1), end, 1e-15);
}

}  // namespace
}  // namespace kiln::optim
