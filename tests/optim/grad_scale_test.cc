// Gradient clipping folded into the optimizer step: step(lr, s) gives bitwise the weights and
// state of scaling the gradients by s first and then step(lr), for every optimizer.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "kiln/optim/adamw.h"
#include "kiln/optim/grad_norm.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lars.h"
#include "optim_test_util.h"

namespace kiln::optim {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(ParamStore&)>;

// Weights after three steps at grad scales 0.3, 1, 0.8: folded (step(lr, s)) or not.
std::vector<float> three_steps(const MakeOptimizer& make, bool folded) {
  ParamStore store;
  test::make_store(store);
  std::unique_ptr<Optimizer> opt = make(store);
  const float scales[] = {0.3f, 1.0f, 0.8f};
  for (int t = 0; t < 3; ++t) {
    test::fill_grads(store, t + 1);
    if (folded) {
      opt->step(0.05f, scales[t]);
    } else {
      scale_grads(store, scales[t]);
      opt->step(0.05f);
    }
  }
  std::vector<float> out = store.values_vector();
  for (const NamedState& s : opt->state()) {
    const float* p = s.data->ptr<float>();
    out.insert(out.end(), p, p + s.data->numel());
  }
  return out;
}

TEST(GradScale, FoldedIntoTheStepEqualsScalingTheGradientsFirst) {
  const std::pair<const char*, MakeOptimizer> optimizers[] = {
      {"lamb", [](ParamStore& s) { return std::make_unique<Lamb>(s); }},
      {"adamw", [](ParamStore& s) { return std::make_unique<AdamW>(s); }},
      {"lars", [](ParamStore& s) { return std::make_unique<Lars>(s); }},
  };
  for (const auto& [name, make] : optimizers) {
    const std::vector<float> folded = three_steps(make, true), scaled = three_steps(make, false);
    ASSERT_EQ(folded.size(), scaled.size()) << name;
    EXPECT_EQ(folded, scaled) << name;
    // Not vacuous: the scale changes the result.
    const std::vector<float> ones = [&] {
      ParamStore store;
      test::make_store(store);
      std::unique_ptr<Optimizer> opt = make(store);
      for (int t = 0; t < 3; ++t) test::fill_grads(store, t + 1), opt->step(0.05f);
      return store.values_vector();
    }();
    EXPECT_NE(std::vector<float>(folded.begin(), folded.begin() + int64_t(ones.size())), ones) << name;
  }
}

}  // namespace
}  // namespace kiln::optim
