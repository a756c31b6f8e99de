// `kiln train resnet --dry-run`'s arithmetic (train/dry_run/resnet_dry_run.h); MemoryEstimate and MpiResNet
// compare its estimate with measured runs.
#include "kiln/train/dry_run/resnet_dry_run.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/core/error.h"
#include "kiln/models/resnet_footprint.h"

namespace kiln::train {
namespace {

TEST(ResNetDryRun, CountsLarsStateTheComputeCopyAndTheShard) {
  const models::ResNetConfig c = models::ResNetConfig::resnet50();
  const models::ResNetFootprint f = models::resnet_footprint(c, 32, 32, 224, DType::bf16);
  const DryRunReport bf16 = resnet_dry_run(c, "resnet50", 224, 32, 32, 1, false, DType::bf16);
  EXPECT_EQ(bf16.parameters, 25557032);
  EXPECT_DOUBLE_EQ(bf16.bytes_per_rank_weights_grads_optimizer, 14.0 * double(f.store_elements));
  EXPECT_DOUBLE_EQ(bf16.bytes_tensors_peak,
                   bf16.bytes_per_rank_weights_grads_optimizer + f.saved + f.gradients + f.scratch);
  // 3 x the forward's 2 x 4.09 GMAC per image, x the global batch.
  EXPECT_DOUBLE_EQ(bf16.flops_per_step, 3.0 * double(f.flops_per_image) * 32);
  EXPECT_NEAR(double(f.flops_per_image), 8.18e9, 0.01e9);
  const DryRunReport f32 = resnet_dry_run(c, "resnet50", 224, 32, 32, 1, false, DType::f32);
  EXPECT_DOUBLE_EQ(f32.bytes_per_rank_weights_grads_optimizer, 12.0 * double(f.store_elements));
  EXPECT_GT(f32.bytes_activations_per_microbatch, 1.9 * bf16.bytes_activations_per_microbatch);
  // ZeRO-1 on 4 ranks: a quarter of the momentum; the global batch is 4 x 32.
  const DryRunReport zero = resnet_dry_run(c, "resnet50", 224, 32, 32, 4, true, DType::bf16);
  EXPECT_DOUBLE_EQ(zero.bytes_per_rank_weights_grads_optimizer, 11.0 * double(f.store_elements));
  EXPECT_DOUBLE_EQ(zero.flops_per_step, 4 * bf16.flops_per_step);
  EXPECT_NE(zero.text.find("(11 bytes/param: bf16 copy, fp32 master, grad, momentum shard)"), std::string::npos)
      << zero.text;
  const DryRunReport three = resnet_dry_run(c, "resnet50", 224, 32, 32, 3, true, DType::f32);
  EXPECT_NE(three.text.find("(9.33333 bytes/param"), std::string::npos) << three.text;
}

TEST(ResNetDryRun, ALargerEvaluationBatchGrowsOnlyTheSavedActivations) {
  const models::ResNetConfig c = models::ResNetConfig::resnet18();
  const models::ResNetFootprint same = models::resnet_footprint(c, 16, 16, 128, DType::f32);
  const models::ResNetFootprint larger = models::resnet_footprint(c, 16, 48, 128, DType::f32);
  EXPECT_GT(larger.saved, 2.5 * same.saved);
  EXPECT_DOUBLE_EQ(larger.gradients, same.gradients);
  EXPECT_DOUBLE_EQ(larger.scratch, same.scratch);
  EXPECT_DOUBLE_EQ(models::resnet_footprint(c, 16, 8, 128, DType::f32).saved, same.saved);
}

TEST(ResNetDryRun, RefusesImpossibleSizesNamingThem) {
  const models::ResNetConfig c = models::ResNetConfig::resnet50();
  auto message = [&](int64_t image, int64_t batch) {
    try {
      resnet_dry_run(c, "resnet50", image, batch, batch, 1, false, DType::f32);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(0, 8).find("image size must be at least 1, got 0"), std::string::npos) << message(0, 8);
  EXPECT_NE(message(224, 0).find("batch size per rank must be at least 1"), std::string::npos);
  EXPECT_NO_THROW(resnet_dry_run(c, "resnet50", 16, 2, 2, 1, false, DType::f32));  // padding keeps a pixel
}

}  // namespace
}  // namespace kiln::train
