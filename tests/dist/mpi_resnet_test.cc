// `mpirun -np 2 kiln train resnet --sync-bn` against one process at the same batch, on real images
// (Fashion-MNIST folders): each rank decodes half of every batch, BatchNorm statistics and their
// backward sums span both halves, so losses, evaluations, weights and BN running statistics
// match the one-process run within fp32 rounding. Without --sync-bn each rank normalises its own
// half (tinygrad's UnsyncedBatchNorm): the losses differ from the first step. The SyncBN run reduces
// its gradients in buckets during backward (--overlap-grad-reduce), and runs once more on the
// simulated device (--device sim), bitwise the same. Label `mpi`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "tests/dist/mpi_test_util.h"
#include "tests/testing/dry_run_check.h"
#include "tests/testing/fashion_mnist.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// fp32 rounding: the ranks' channel sums are added in another order than one process adds them,
// and oneDNN's AVX2 convolutions round differently for 8 and 16 images per call. This tiny net
// amplifies such differences from step to step (to 0.3 in the weights after 8 steps under
// ONEDNN_MAX_CPU_ISA=AVX2), so the SyncBN run is compared over 4 steps, two epochs of 2.
constexpr double kLossTolerance = 1e-5;    // relative, per step
constexpr double kWeightTolerance = 1e-4;  // largest over all weights and BN statistics (largest_difference)

struct ResNetRun {
  int status = 0;
  std::string output;
  std::vector<double> losses;
  std::vector<std::string> evals;  // "top-1 0.1234 (5 / 40 images), loss 1.2345"
  fs::path checkpoint;
};

ResNetRun train(const std::string& launcher, const fs::path& data, const fs::path& dir, const std::string& flags) {
  fs::create_directories(dir);
  ResNetRun r;
  std::tie(r.status, r.output) = testing::run_command(
      launcher + " " KILN_BINARY " train resnet --arch resnet18 --width 8 --small-images --data " + data.string() +
      // lr 0.1: at 1.0 this tiny net multiplies a rounding difference about 30x per step.
      " --image-size 28 --eval-resize 28 --batch-size 16 --epochs 2 --warmup-epochs 0 --lr 0.1 --workers 1"
      " --log-interval 1 --save " + (dir / "ckpt").string() + " --save-interval 2 --output-dir " + dir.string() +
      " " + flags);
  r.losses = testing::read_losses(dir / "losses.txt");
  const std::regex eval("eval: (top-1 [0-9.]+ \\(\\d+ / \\d+ images\\), loss [0-9.]+)");
  for (std::sregex_iterator i(r.output.begin(), r.output.end(), eval), end; i != end; ++i) r.evals.push_back((*i)[1]);
  for (const fs::directory_entry& e : fs::directory_iterator(dir / "ckpt"))  // the newest: iter_0000008 > iter_0000004
    if (e.path().filename().string().starts_with("iter_") && e.path() / "model.safetensors" > r.checkpoint)
      r.checkpoint = e.path() / "model.safetensors";
  return r;
}

std::string environment(const fs::path& dir) {
  return "OMP_NUM_THREADS=1 KILN_TEST_LOSS_LOG=" + (dir / "losses.txt").string();
}

TEST(MpiResNet, TwoRanksWithSyncBnTrainLikeOneProcessAndWithoutItNormalisePerRank) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  if (!fs::exists(testing::kFashionMnist)) GTEST_SKIP() << "install dataset-fashion-mnist";
  const fs::path root = testing::unique_temp_dir("mpi_resnet");
  const fs::path data = testing::fashion_mnist_folders("mpi2", 32, 40);  // 2 steps per epoch; eval pads 8 rows
  const ResNetRun one = train("env " + environment(root / "one"), data, root / "one", "");
  // Gradients in buckets reduced on the communication thread while backward's SyncBN sums run on this one.
  const ResNetRun sync = train(testing::mpirun(2, environment(root / "sync")), data, root / "sync",
                               "--sync-bn --overlap-grad-reduce --ddp-bucket-size 20000");
  const ResNetRun per_rank = train(testing::mpirun(2, environment(root / "per_rank")), data, root / "per_rank", "");
  // The same on the simulated device: every collective (SyncBN sums, gradient buckets, the weights'
  // broadcast) staged through host buffers (dist/staged_communicator.h).
  const ResNetRun sim = train(testing::mpirun(2, environment(root / "sim")), data, root / "sim",
                              "--sync-bn --overlap-grad-reduce --ddp-bucket-size 20000 --device sim");
  for (const ResNetRun* r : {&one, &sync, &per_rank, &sim}) ASSERT_EQ(r->status, 0) << r->output;
  EXPECT_EQ(sim.losses, sync.losses);
  EXPECT_EQ(sim.evals, sync.evals);
  EXPECT_EQ(testing::largest_difference(sim.checkpoint, sync.checkpoint), 0.0);

  EXPECT_NE(sync.output.find("replicated parameters bitwise identical on 2 ranks"), std::string::npos) << sync.output;
  EXPECT_NE(sync.output.find("elements, each all-reduced during backward"), std::string::npos) << sync.output;
  EXPECT_NE(sync.output.find(" ms (2 ranks) | "), std::string::npos) << "the console line shows communication time\n"
                                                                   << sync.output;
  ASSERT_EQ(one.losses.size(), 4u) << one.output;
  ASSERT_EQ(sync.losses.size(), 4u) << sync.output;
  double loss_difference = 0;
  for (size_t i = 0; i < one.losses.size(); ++i) {
    EXPECT_NEAR(sync.losses[i], one.losses[i], kLossTolerance * std::abs(one.losses[i])) << "step " << i + 1;
    loss_difference = std::max(loss_difference, std::abs(sync.losses[i] - one.losses[i]) / std::abs(one.losses[i]));
  }
  ASSERT_EQ(one.evals.size(), 2u) << one.output;
  EXPECT_EQ(sync.evals, one.evals) << "each rank evaluates half of every batch; the counts are summed";
  const double weights = testing::largest_difference(one.checkpoint, sync.checkpoint);
  EXPECT_LE(weights, kWeightTolerance);

  ASSERT_EQ(per_rank.losses.size(), 4u) << per_rank.output;
  EXPECT_GT(std::abs(per_rank.losses[0] - one.losses[0]), 10 * kLossTolerance * std::abs(one.losses[0]))
      << "per-rank BatchNorm sees half the batch, so even the first loss differs";
  std::cout << "sync-bn vs one process: largest relative loss difference " << loss_difference
            << ", largest weight / BN statistic difference after 4 steps " << weights << "\n";
}

// ZeRO-1 with LARS: each rank updates half of the weights and keeps half of the momentum; the
// trust ratios add the shards' partial norms. The same losses and weights as plain data parallel,
// and bitwise the same on the simulated device.
TEST(MpiResNet, TheDistributedOptimizerTrainsLikePlainDataParallel) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  if (!fs::exists(testing::kFashionMnist)) GTEST_SKIP() << "install dataset-fashion-mnist";
  const fs::path root = testing::unique_temp_dir("mpi_resnet_zero");
  const fs::path data = testing::fashion_mnist_folders("mpi_zero", 64, 40);
  const ResNetRun plain = train(testing::mpirun(2, environment(root / "plain")), data, root / "plain", "--sync-bn");
  const ResNetRun zero = train(testing::mpirun(2, environment(root / "zero")), data, root / "zero",
                               "--sync-bn --use-distributed-optimizer");
  for (const ResNetRun* r : {&plain, &zero}) ASSERT_EQ(r->status, 0) << r->output;
  EXPECT_NE(zero.output.find("distributed optimizer (ZeRO-1)"), std::string::npos) << zero.output;
  ASSERT_EQ(zero.losses.size(), 8u) << zero.output;
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_NEAR(zero.losses[i], plain.losses[i], kLossTolerance * std::abs(plain.losses[i])) << "step " << i + 1;
  EXPECT_LE(testing::largest_difference(plain.checkpoint, zero.checkpoint), kWeightTolerance);
  // On the simulated device (the shards, BN statistics and collectives through host buffers):
  // bitwise the host run.
  const ResNetRun sim = train(testing::mpirun(2, environment(root / "zero_sim")), data, root / "zero_sim",
                              "--sync-bn --use-distributed-optimizer --device sim");
  ASSERT_EQ(sim.status, 0) << sim.output;
  EXPECT_EQ(sim.losses, zero.losses);
  EXPECT_EQ(testing::largest_difference(zero.checkpoint, sim.checkpoint), 0.0);
}

// Each rank of `mpirun -np 2 kiln train resnet --use-distributed-optimizer` holds half of the
// momentum and nothing whole (the optimizer state is gathered whole only to save a checkpoint):
// its measured peak is the dry run's estimate for that layout (3%), below plain data parallel's.
TEST(MpiResNet, TheDistributedOptimizerPeakIsTheDryRunsEstimate) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = testing::unique_temp_dir("mpi_resnet_zero_memory");
  const std::string train = testing::mpirun(2, "OMP_NUM_THREADS=1") + " " KILN_BINARY
                            " train resnet --fake-data --image-size 96 --batch-size 32 --bf16 --output-dir " +
                            dir.string() + " ";
  const std::string step2 = std::string(R"(step +2/.*)") + testing::kConsolePeak;
  const double plain = testing::expect_dry_run_estimate(train, "--benchmark 2 --log-interval 1", step2);
  const double zero = testing::expect_dry_run_estimate(train + "--use-distributed-optimizer",
                                                       "--benchmark 2 --log-interval 1", step2);
  EXPECT_LT(zero, plain);
}

TEST(MpiResNet, ABatchThatDoesNotSplitOverTheRanksIsRefused) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = testing::unique_temp_dir("mpi_resnet_batch");
  const auto [status, output] = testing::run_command(
      testing::mpirun(2, "OMP_NUM_THREADS=1") + " " KILN_BINARY " train resnet --fake-data --batch-size 7 --output-dir " +
          dir.string(),
      testing::Capture::stderr_only);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("error: config: train.batch_size 7 does not split over 2 ranks: use a multiple of 2"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace kiln
