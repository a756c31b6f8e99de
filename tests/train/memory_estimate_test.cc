// `kiln train bert --dry-run` estimates the peak of the tensors a run holds; the run's console
// line reports the measured peak ("tensors X GiB (peak Y)"). For bert-tiny at sequence 512 (the
// attention core and the MLM logits large against the weights) in f32 and bf16, post- and pre-LN,
// with and without recomputation, the two agree within 3% (they agreed to 0.01 GiB of about
// 0.7 GiB when this was written, 2026-12-01). Label `integration`.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/testing/fashion_mnist.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {

double gib_after(const std::string& output, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

TEST(MemoryEstimate, DryRunPredictsTheMeasuredTensorsPeak) {
  const std::string dir = testing::unique_temp_dir("memory_estimate").string();
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --fake-data --seq-length 512 --max-predictions 76 "
                            "--global-batch-size 16 --output-dir " + dir + " ";
  for (const std::string flags : {"", "--bf16", "--pre-ln", "--pre-ln --bf16 --recompute-activations"}) {
    const auto [dry_status, dry] = testing::run_command(train + flags + " --dry-run");
    ASSERT_EQ(dry_status, 0) << dry;
    const double estimate = gib_after(dry, R"(tensors peak per rank \(estimate[^:]*: ([0-9.]+) GiB)");
    const auto [run_status, run] =
        testing::run_command(train + flags + " --benchmark 1 --log-interval 1 --eval-iters 1 --eval-batch-size 16");
    ASSERT_EQ(run_status, 0) << run;
    const double measured = gib_after(run, R"(tensors [0-9.]+ GiB \(peak ([0-9.]+)\))");
    ASSERT_GT(estimate, 0.3) << dry;
    ASSERT_GT(measured, 0.3) << run;
    EXPECT_NEAR(estimate / measured, 1.0, 0.03) << "'" << flags << "': estimate " << estimate << " GiB, measured "
                                                 << measured << " GiB";
  }
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
  for (const std::string flags : {"", "--bf16", "--arch resnet34 --bf16"}) {
    const auto [dry_status, dry] = testing::run_command(train + flags + " --dry-run");
    ASSERT_EQ(dry_status, 0) << dry;
    const double estimate = gib_after(dry, R"(tensors peak per rank \(estimate[^:]*: ([0-9.]+) GiB)");
    const auto [run_status, run] =
        testing::run_command(train + flags + " --epochs 2 --warmup-epochs 1 --log-interval 1");
    ASSERT_EQ(run_status, 0) << run;
    ASSERT_NE(run.find("epoch   2 step      8/8"), std::string::npos) << run;
    const double measured = gib_after(run, R"(step      8/8 .*tensors [0-9.]+ GiB \(peak ([0-9.]+)\))");
    ASSERT_GT(estimate, 0.2) << dry;
    ASSERT_GT(measured, 0.2) << run;
    EXPECT_NEAR(estimate / measured, 1.0, 0.03) << "'" << flags << "': estimate " << estimate << " GiB, measured "
                                                 << measured << " GiB";
  }
}

}  // namespace
}  // namespace kiln
