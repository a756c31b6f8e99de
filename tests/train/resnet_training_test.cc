// End-to-end ResNet training on real images: Fashion-MNIST (Debian's dataset-fashion-mnist)
// written as JPEG class folders by `kiln images from-idx`, then `kiln train resnet`'s loop.
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/resnet.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/fashion_mnist.h"
#include "tests/testing/mlperf_checker.h"
#include "tests/testing/temp_dir.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;

ResNetTrainConfig small_resnet(const fs::path& data, const fs::path& run, std::vector<std::string> extra,
                               std::vector<std::pair<std::string, std::string>>* resolved = nullptr) {
  ResNetTrainConfig c;
  ConfigRegistry registry;
  register_resnet_config(registry, c);
  testing::apply_flag_list(registry, testing::concat({"--arch", "resnet18", "--width", "16", "--small-images",
                                                      "--data", data.string(), "--image-size", "28",
                                                      "--eval-resize", "28", "--lr", "2.0", "--warmup-epochs",
                                                      "1", "--weight-decay", "1e-4", "--log-interval", "1000",
                                                      "--output-dir", run.string()},
                                                     extra));
  finalize_resnet_config(c, registry);
  if (resolved) *resolved = registry.resolved();
  return c;
}

// Accuracy of always predicting the most common class of the image folder `dir` (one sub-folder
// per class): what a model that learned nothing scores.
double majority_class_accuracy(const fs::path& dir) {
  int64_t total = 0, most = 0;
  for (const auto& cls : fs::directory_iterator(dir)) {
    if (!cls.is_directory()) continue;
    int64_t n = 0;
    for (const auto& f : fs::directory_iterator(cls.path())) n += f.is_regular_file();
    total += n;
    most = std::max(most, n);
  }
  if (total == 0) throw Error("{}: no images", dir.string());
  return double(most) / double(total);
}

TEST(ResNetTraining, ReachesTheMlperfTargetOnFashionMnistWithACompliantLog) {
  const fs::path data = testing::fashion_mnist_folders("target", 3000, 1000);
  // Learning, not luck: the eval set's majority class, measured here (about 0.1 on ten balanced
  // classes); the final top-1 must be 50 points above it.
  const double majority = majority_class_accuracy(data / "val");
  std::vector<std::pair<std::string, std::string>> resolved;
  const ResNetTrainConfig c = small_resnet(data, data / "run", {"--epochs", "10", "--batch-size", "64", "--seed", "7"}, &resolved);
  std::ostringstream console;
  const ResNetRunResult r = train_resnet(c, resolved, console);
  ASSERT_TRUE(r.reached_target) << console.str();
  EXPECT_GE(r.eval_top1.back(), 0.759);
  EXPECT_GT(r.eval_top1.back(), majority + 0.5) << "majority class " << majority;
  std::cout << "top-1 " << r.eval_top1.front() << " -> " << r.eval_top1.back() << "; majority class " << majority << "\n";
  EXPECT_LT(r.eval_top1.front(), r.eval_top1.back());
  testing::expect_compliant_where_checker_installed(r.log_file, "4.0.0");
}

TEST(ResNetTraining, ResumedRunContinuesBitwiseIdentically) {
  const fs::path data = testing::fashion_mnist_folders("resume", 320, 64);
  const std::vector<std::string> common = {"--epochs", "2", "--eval-freq", "10", "--batch-size", "32"};
  auto with = [&](const std::vector<std::string>& extra) { return testing::concat(common, extra); };
  std::ostringstream console;
  const ResNetRunResult full = train_resnet(small_resnet(data, data / "full", with({})), {}, console);
  ASSERT_EQ(full.losses.size(), 20u);
  const fs::path ckpt = data / "ckpt";
  const ResNetRunResult first = train_resnet(
      small_resnet(data, data / "split", with({"--save", ckpt.string(), "--exit-interval", "10"})), {}, console);
  ASSERT_EQ(first.losses.size(), 10u);
  const ResNetRunResult second = train_resnet(
      small_resnet(data, data / "split", with({"--load", ckpt.string()})), {}, console);
  ASSERT_EQ(second.losses.size(), 10u) << console.str();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(first.losses[i], full.losses[i]) << "step " << i + 1;
    EXPECT_EQ(second.losses[i], full.losses[10 + i]) << "step " << 11 + i;
  }
}

}  // namespace
}  // namespace kiln::train
