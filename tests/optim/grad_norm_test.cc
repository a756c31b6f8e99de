#include "kiln/optim/grad_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/error.h"
#include "optim_test_util.h"

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

}  // namespace
}  // namespace kiln::optim
