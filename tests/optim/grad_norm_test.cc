#include "kiln/optim/grad_norm.h"
#include "kiln/optim/step_scalars.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/core/error.h"
#include "optim_test_util.h"
#include "tests/testing/thread_count.h"

namespace kiln::optim {
namespace {

double reference_norm(const ParamStore& store) {
  double s = 0;
  for (const ParamSpec& p : store.specs())
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) s += double(store.host_grads()[size_t(i)]) * store.host_grads()[size_t(i)];
  return std::sqrt(s);
}

TEST(GradNorm, GlobalNormMatchesFloat64Reference) {
  ParamStore store;
  test::make_store(store, 9000);  // weight spans several reduction chunks
  test::fill_grads(store, 3);
  const double ref = reference_norm(store);
  EXPECT_NEAR(global_grad_norm(store), ref, 1e-12 * ref);
  EXPECT_GT(ref, 0.0);
}

// A replica another rank counts (norm_owner false) is left out of the norm.
TEST(GradNorm, GlobalNormLeavesOutParametersThisRankDoesNotOwn) {
  ParamStore store;
  test::make_store(store);
  test::fill_grads(store, 2);
  const ParamSpec& bias = store.specs()[1];
  double bias_squares = 0;
  for (int64_t i = bias.offset; i < bias.offset + bias.numel; ++i)
    bias_squares += double(store.host_grads()[size_t(i)]) * store.host_grads()[size_t(i)];
  const double all = reference_norm(store);
  store.set_norm_owner(1, false);
  EXPECT_NEAR(global_grad_norm(store), std::sqrt(all * all - bias_squares), 1e-12 * all);
  EXPECT_GT(bias_squares, 0.0);
}

TEST(GradNorm, ClipScalesToMaxNormAndReturnsPreClipNorm) {
  ParamStore store;
  test::make_store(store);
  test::fill_grads(store, 1);
  const std::vector<float> before = store.grads_vector();
  const double norm = reference_norm(store);
  const double max_norm = norm / 4;
  EXPECT_NEAR(clip_grad_norm(store, max_norm), norm, 1e-12 * norm);
  EXPECT_NEAR(global_grad_norm(store), max_norm, 1e-6 * max_norm);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(store.host_grads()[i], before[i] * (max_norm / norm), 1e-8);
}

TEST(GradNorm, ClipLeavesSmallGradientsUntouched) {
  ParamStore store;
  test::make_store(store);
  test::fill_grads(store, 2);
  const std::vector<float> before = store.grads_vector();
  const double norm = reference_norm(store);
  EXPECT_NEAR(clip_grad_norm(store, norm * 1.5), norm, 1e-12 * norm);
  EXPECT_EQ(store.grads_vector(), before);
  EXPECT_THROW(clip_grad_norm(store, 0.0), Error);
}

TEST(GradNorm, ScaleGradsMultipliesEveryGradient) {
  ParamStore store;
  test::make_store(store);
  test::fill_grads(store, 4);
  const std::vector<float> before = store.grads_vector();
  scale_grads(store, 1.0f / 2048);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(store.host_grads()[i], before[i] * (1.0f / 2048));
}

TEST(GradNorm, GlobalNormIsBitwiseIdenticalAtOneAndTwoThreads) {
  ParamStore store;
  test::make_store(store, 30000);  // 120000 elements: eight sum chunks
  test::fill_grads(store, 5);
  kiln::testing::expect_thread_count_independent("global_grad_norm", [&] { return global_grad_norm(store); });
  const double norm = global_grad_norm(store);
  EXPECT_NEAR(norm, reference_norm(store), 1e-12 * norm);
}

TEST(GradNorm, ClipNeverScalesByANonFiniteNorm) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    ParamStore store;
    test::make_store(store);
    test::fill_grads(store, 6);
    store.host_grads()[3] = bad;
    const std::vector<float> before = store.grads_vector();
    const double norm = clip_grad_norm(store, 1e-3);
    EXPECT_FALSE(std::isfinite(norm)) << bad;
    // Untouched (compared bit for bit: NaN != NaN).
    EXPECT_EQ(std::memcmp(store.grads_vector().data(), before.data(), before.size() * sizeof(float)), 0)
        << bad;
  }
}

// The optimizer phase's device part as the training loop runs it: unscale by the block's factor,
// the norm into the block, then the decision.
StepDecision run_step_phase(ParamStore& store, double unscale, double max_norm) {
  StepScalars scalars(cpu_context());
  StepInputs in;
  in.unscale = unscale;
  in.max_norm = max_norm;
  in.loss = 1.0;
  scalars.write(in);
  ops::scale_by_step_scalar(cpu_context(), store.grads, scalars.device(), ops::kStepUnscale);
  GradNorm(store, cpu_context()).sum_squares(scalars.device());
  ops::step_decide(cpu_context(), scalars.device());
  return scalars.read();
}

TEST(GradNorm, StepPhaseUnscalesDecidesClippingAndSkipsNonFiniteGradients) {
  ParamStore store;
  test::make_store(store, 9000);
  test::fill_grads(store, 7);
  const std::vector<float> before = store.grads_vector();
  const StepDecision d = run_step_phase(store, 1.0 / 2048, 1e-6);
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(store.host_grads()[i], before[i] * (1.0f / 2048));
  const double norm = global_grad_norm(store);
  EXPECT_EQ(d.norm, norm);
  EXPECT_EQ(d.norm_squares, norm * norm);
  EXPECT_FALSE(d.skipped);
  EXPECT_EQ(d.grad_factor, double(float(1e-6 / norm)));
  EXPECT_EQ(run_step_phase(store, 1.0, 0.0).grad_factor, 1.0);  // no clipping

  const ParamSpec& w = store.specs()[0];
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    test::fill_grads(store, 8);
    store.host_grads()[size_t(w.offset + w.numel - 1)] = bad;  // the last element of the last chunk
    EXPECT_TRUE(run_step_phase(store, 1.0 / 2048, 1.0).skipped) << bad;
  }
  // A finite gradient that overflows only through the scale factor skips too.
  test::fill_grads(store, 9);
  store.host_grads()[0] = 3e38f;
  EXPECT_TRUE(run_step_phase(store, 2.0, 1.0).skipped);
}

}  // namespace
}  // namespace kiln::optim
