// ResNet (models/resnet.h): torchvision names, shapes and counts, FLOPs, initialisation, and a
// small-images network that learns a tiny batch.
#include <gtest/gtest.h>

#include <cmath>

#include "../backend/random_fill.h"
#include "kiln/core/error.h"
#include "kiln/models/resnet.h"
#include "kiln/models/resnet_footprint.h"
#include "kiln/nn/cross_entropy.h"

namespace kiln::models {
namespace {

int64_t total(const ParamStore& store) {
  int64_t n = 0;
  for (const auto& s : store.specs()) n += s.numel;
  return n;
}

TEST(ResNetModel, ResNet50HasTorchvisionNamesShapesCountsAndFlops) {
  ParamStore store;
  ResNet model(ResNetConfig::resnet50(), store);
  // torchvision.models.resnet50(): 161 parameters, 25,557,032 elements; 53 BNs x 3 buffers.
  EXPECT_EQ(store.specs().size(), 161u);
  EXPECT_EQ(total(store), 25557032);
  EXPECT_EQ(model.buffers().size(), 159u);
  const std::vector<std::string> layer2_0 = {
      "layer2.0.conv1.weight", "layer2.0.bn1.weight",          "layer2.0.bn1.bias",
      "layer2.0.conv2.weight", "layer2.0.bn2.weight",          "layer2.0.bn2.bias",
      "layer2.0.conv3.weight", "layer2.0.bn3.weight",          "layer2.0.bn3.bias",
      "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
      "layer2.0.downsample.1.bias"};
  const ParamSpec* first = store.find("layer2.0.conv1.weight");
  ASSERT_NE(first, nullptr);
  const size_t at = size_t(first - store.specs().data());
  for (size_t i = 0; i < layer2_0.size(); ++i) EXPECT_EQ(store.specs()[at + i].name, layer2_0[i]);
  EXPECT_EQ(store.specs().front().name, "conv1.weight");
  EXPECT_EQ(store.find("conv1.weight")->shape, (Shape{64, 3, 7, 7}));
  EXPECT_EQ(store.find("layer2.0.conv2.weight")->shape, (Shape{128, 128, 3, 3}));  // v1.5
  EXPECT_EQ(store.find("layer2.0.downsample.0.weight")->shape, (Shape{512, 256, 1, 1}));
  EXPECT_EQ(store.find("fc.weight")->shape, (Shape{1000, 2048}));
  EXPECT_EQ(store.specs().back().name, "fc.bias");
  for (const auto& s : store.specs()) {
    const bool skip = s.name.find("bn") != std::string::npos ||
                      s.name.find("bias") != std::string::npos ||
                      s.name.find("downsample.1") != std::string::npos;
    EXPECT_EQ(s.decay, !skip) << s.name;  // MLPerf's LARS skip list
  }
  EXPECT_EQ(model.buffers()[0].first, "bn1.running_mean");
  EXPECT_EQ(model.buffers()[2].first, "bn1.num_batches_tracked");
  // Forward FLOPs of convs and fc at 224x224, as counted from torchvision's module shapes.
  EXPECT_EQ(model.flops_per_image(224, 224), 8178368512);
}

TEST(ResNetModel, ResNet18CountsAndTorchvisionInit) {
  ParamStore store;
  ResNetConfig config = ResNetConfig::resnet18();
  config.zero_init_residual = true;
  ResNet model(config, store);
  EXPECT_EQ(total(store), 11689512);
  EXPECT_EQ(model.flops_per_image(224, 224), 3628146688);
  model.init(42);
  const std::vector<float> a = store.values_vector();
  // kaiming_normal_(fan_out): std sqrt(2 / (512·3·3)) on 2.4M elements.
  const ParamSpec& w = *store.find("layer4.1.conv2.weight");
  double s1 = 0, s2 = 0;
  for (int64_t i = 0; i < w.numel; ++i) {
    s1 += a[w.offset + i];
    s2 += double(a[w.offset + i]) * a[w.offset + i];
  }
  const double mean = s1 / w.numel, std = std::sqrt(s2 / w.numel - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std, std::sqrt(2.0 / (512 * 9)), 2e-3 * std::sqrt(2.0 / (512 * 9)));
  const ParamSpec& fc = *store.find("fc.weight");
  float mx = 0;
  for (int64_t i = 0; i < fc.numel; ++i) mx = std::max(mx, std::abs(a[fc.offset + i]));
  EXPECT_LE(mx, 1.0f / std::sqrt(512.0f));
  EXPECT_GT(mx, 0.99f / std::sqrt(512.0f));
  // BN: gamma 1, except 0 for each block's last BN with zero_init_residual; beta 0.
  EXPECT_EQ(a[store.find("bn1.weight")->offset], 1.0f);
  EXPECT_EQ(a[store.find("layer1.0.bn1.weight")->offset], 1.0f);
  EXPECT_EQ(a[store.find("layer1.0.bn2.weight")->offset], 0.0f);
  EXPECT_EQ(a[store.find("layer2.0.downsample.1.weight")->offset], 1.0f);
  EXPECT_EQ(a[store.find("layer3.1.bn1.bias")->offset + 5], 0.0f);
  // Deterministic in the seed.
  model.init(42);
  EXPECT_EQ(store.values_vector(), a);
  model.init(43);
  EXPECT_NE(store.values_vector(), a);
}

// The dry run's walk over a configuration (models/resnet_footprint.h) counts the parameters, the
// store's size and the FLOPs of the model built from it.
TEST(ResNetModel, FootprintCountsWhatTheBuiltModelHolds) {
  ResNetConfig small = ResNetConfig::resnet18(10);
  small.small_images = true;
  small.widths = {8, 16, 24};
  small.depths = {1, 2, 1};
  small.stem_width = 8;
  for (const ResNetConfig& config : {ResNetConfig::resnet50(), ResNetConfig::resnet18(), small}) {
    ParamStore store;
    const ResNet model(config, store);
    const int64_t image = config.small_images ? 28 : 224;
    const ResNetFootprint f = resnet_footprint(config, 2, 2, image, DType::f32);
    EXPECT_EQ(f.parameters, total(store));
    EXPECT_EQ(f.store_elements, store.size());
    EXPECT_EQ(f.flops_per_image, model.flops_per_image(image, image));
  }
}

TEST(ResNetModel, SmallImagesNetworkLearnsATinyBatch) {
  ResNetConfig config;
  config.block = ResNetBlock::basic;
  config.depths = {1, 1};
  config.widths = {8, 16};
  config.stem_width = 8;
  config.in_channels = 1;
  config.num_classes = 4;
  config.small_images = true;
  ParamStore store;
  ResNet model(config, store);
  EXPECT_EQ(store.find("conv1.weight")->shape, (Shape{8, 1, 3, 3}));
  model.init(7);
  const int64_t N = 8, H = 12, W = 12;
  const auto images = kiln::testing::random_normal(N * H * W, 1000);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 3, 2, 1, 0};
  nn::SoftmaxCrossEntropy xent(0.1f);
  Step step;
  double first = 0, last = 0;
  for (int it = 0; it < 40; ++it) {
    const Tensor logits = model.forward(step, images.data(), N, H, W);
    ASSERT_EQ(logits.shape, (Shape{N, 4}));
    const double loss = xent.forward(logits, labels.data()).loss;
    ASSERT_TRUE(std::isfinite(loss));
    if (it == 0) first = loss;
    last = loss;
    store.zero_grad();
    model.backward(step, xent.backward(1.0f));
    for (int64_t i = 0; i < store.size(); ++i) store.host_values()[i] -= 0.1f * store.host_grads()[i];
  }
  EXPECT_LT(last, 0.5 * first);
  // Eval mode uses the running statistics and is repeatable.
  step.training = false;
  const Tensor e1 = model.forward(step, images.data(), N, H, W);
  const std::vector<float> v1(e1.ptr<float>(), e1.ptr<float>() + e1.numel());
  const Tensor e2 = model.forward(step, images.data(), N, H, W);
  EXPECT_EQ(v1, std::vector<float>(e2.ptr<float>(), e2.ptr<float>() + e2.numel()));
  EXPECT_EQ(model.buffers()[2].second->ptr<float>()[0], 40.0f);  // num_batches_tracked
}

TEST(ResNetModel, RejectsBadConfigs) {
  ParamStore a;
  ResNetConfig c = ResNetConfig::resnet18(10);
  c.widths = {64, 128};
  EXPECT_THROW({ ResNet m(c, a); }, Error);
}

}  // namespace
}  // namespace kiln::models
