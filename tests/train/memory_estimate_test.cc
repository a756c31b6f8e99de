// `kiln train bert --dry-run` estimates the peak of the tensors a run holds; the run's console
// line reports the measured peak ("tensors X GiB (peak Y)"). For bert-tiny at sequence 512 (the
// attention core and the MLM logits large against the weights) in f32 and bf16, post- and pre-LN,
// with and without recomputation (selective, and full of the first layer), the two agree within
// 3% (they agreed to 0.01 GiB of about 0.7 GiB when this was written, 2026-12-01). Label
// `integration`.
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/dry_run_check.h"
#include "tests/testing/fashion_mnist.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {

TEST(MemoryEstimate, DryRunPredictsTheMeasuredTensorsPeak) {
  const std::string dir = testing::unique_temp_dir("memory_estimate").string();
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --fake-data --seq-length 512 --max-predictions 76 "
                            "--global-batch-size 16 --output-dir " + dir + " ";
  for (const std::string flags : {"", "--bf16", "--pre-ln", "--pre-ln --bf16 --recompute-activations",
                                  "--bf16 --attention-backend flash",
                                  "--bf16 --recompute-granularity full --recompute-method block --recompute-num-layers 1"})
    testing::expect_dry_run_estimate(train + flags,
                                     "--benchmark 1 --log-interval 1 --eval-iters 1 --eval-batch-size 16");
}

// `kiln train resnet --dry-run` likewise, on real images (Fashion-MNIST upscaled to 96 px) for two
// epochs of 4 steps, so that an evaluation at twice the training batch (its forward grows the
// layers' saved buffers) comes before the second epoch's steps; the last console line reports the
// peak. ResNet-50 in f32 and bf16, and ResNet-34 (basic blocks) in bf16; 0.4-0.8 GiB each.
TEST(MemoryEstimate, ResNetDryRunPredictsTheMeasuredTensorsPeak) {
  const std::filesystem::path data = testing::fashion_mnist_folders("memory_estimate", 64, 64);
  const std::string train = std::string(KILN_BINARY) + " train resnet --data " + data.string() +
                            " --image-size 96 --eval-resize 110 --batch-size 16 --eval-batch-size 32 --output-dir " +
                            (data / "run").string() + " ";
  for (const std::string flags : {"", "--bf16", "--arch resnet34 --bf16"})
    testing::expect_dry_run_estimate(train + flags, "--epochs 2 --warmup-epochs 1 --log-interval 1",
                                     std::string(R"(epoch   2 step      8/8 .*)") + testing::kConsolePeak);
}

}  // namespace
}  // namespace kiln
