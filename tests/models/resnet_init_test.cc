#include <gtest/gtest.h>

#include <cmath>

#include "kiln/nn/params.h"
#include "kiln/models/resnet.h"
#include "tests/testing/thread_count.h"

namespace kiln::models {
namespace {

struct Moments {
  double std = 0, max_abs = 0;
};

Moments moments(const Param& p) {
  double sum = 0, sq = 0, max_abs = 0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    sum += p.w()[i];
    sq += double(p.w()[i]) * p.w()[i];
    max_abs = std::max(max_abs, std::fabs(double(p.w()[i])));
  }
  const double n = double(p.numel()), mean = sum / n;
  return {std::sqrt(sq / n - mean * mean), max_abs};
}

TEST(ResNetInit, MlperfIsTruncatedHeFanInAndSmallNormalFc) {
  ResNetConfig config = ResNetConfig::resnet18(10);
  config.init = ResNetInit::mlperf;
  ParamStore store;
  ResNet model(config, store);
  model.init(3);
  for (const ParamSpec& s : store.specs()) {
    const Param p{&store, int(&s - store.specs().data())};
    if (s.shape.size() == 4) {  // conv (out, in, kh, kw)
      const double fan_in = double(s.shape[1] * s.shape[2] * s.shape[3]);
      const double raw = std::sqrt(2.0 / fan_in) / 0.87962566103423978;
      const Moments m = moments(p);
      // The correction restores the untruncated std; nothing beyond 2 raw sigmas.
      EXPECT_NEAR(m.std, std::sqrt(2.0 / fan_in), 0.05 * std::sqrt(2.0 / fan_in)) << s.name;
      EXPECT_LE(m.max_abs, 2.0 * raw * (1 + 1e-6)) << s.name;
    } else if (s.name == "fc.weight") {
      EXPECT_NEAR(moments(p).std, 0.01, 0.001);
    } else if (s.name == "fc.bias") {
      EXPECT_EQ(moments(p).max_abs, 0.0);
    }
  }
}

TEST(ResNetInit, MlperfDiffersFromTorchvisionAndIsReproducible) {
  auto conv1 = [](ResNetInit init, uint64_t seed) {
    ResNetConfig config = ResNetConfig::resnet18(10);
    config.init = init;
    ParamStore store;
    ResNet model(config, store);
    model.init(seed);
    const ParamSpec& s = *store.find("conv1.weight");
    return std::vector<float>(store.host_values().begin() + s.offset, store.host_values().begin() + s.offset + s.numel);
  };
  EXPECT_EQ(conv1(ResNetInit::mlperf, 5), conv1(ResNetInit::mlperf, 5));
  EXPECT_NE(conv1(ResNetInit::mlperf, 5), conv1(ResNetInit::mlperf, 6));
  EXPECT_NE(conv1(ResNetInit::mlperf, 5), conv1(ResNetInit::torchvision, 5));
}

// resnet.h: initialisation is keyed by parameter and element, so thread count changes nothing.
TEST(ResNetInit, EveryWeightIsTheSameAtOneAndTwoThreads) {
  for (ResNetInit kind : {ResNetInit::mlperf, ResNetInit::torchvision}) {
    kiln::testing::expect_thread_count_independent("resnet18 init", [&] {
      ResNetConfig config = ResNetConfig::resnet18(10);
      config.init = kind;
      ParamStore store;
      ResNet model(config, store);
      model.init(5);
      return store.values_vector();
    });
  }
}

}  // namespace
}  // namespace kiln::models
