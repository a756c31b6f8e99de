// `mpirun -np 2 kiln train bert` against one process at the same global batch (bert-tiny, dropout
// on, 10 steps, 2 micro-batches per rank): the same losses, evaluation and final weights within
// fp32 rounding, and both ranks' weights bitwise identical. Skipped, saying why, without mpirun
// or when kiln was built without MPI. With --overlap-grad-reduce and small buckets (reduced
// during backward on a communication thread) the two-rank run is bitwise the same, and so it is
// on the simulated device (--device sim). Label `mpi`.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/io/safetensors.h"
#include "tests/dist/mpi_bert_data.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// fp32 rounding: the two runs add the same micro-batch gradients in another order. Measured on
// 2026-11-30 (OMP_NUM_THREADS=1): losses within 2.4e-9 relative, weights within 1.2e-7 absolute.
constexpr double kLossTolerance = 1e-6;    // relative, per step
constexpr double kWeightTolerance = 1e-5;  // absolute, largest over all weights

struct TrainRun {
  int status = 0;
  std::string output;
  std::vector<double> losses;
  std::vector<double> evals;  // masked-LM accuracy and loss, NSP accuracy of each evaluation, as printed
  fs::path weights;
};

TrainRun train(const std::string& launcher, const fs::path& data, const fs::path& dir,
               const std::string& flags = "") {
  fs::create_directories(dir);
  const std::string command =
      launcher + " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --data " +
      data.string() + " --vocab " + testing::test_vocab().string() +
      " --global-batch-size 8 --micro-batch-size 2 --train-iters 10 --eval-interval 5 --eval-iters 4"
      " --eval-batch-size 8 --save-interval 10 --save " + (dir / "ckpt").string() + " --output-dir " + dir.string() +
      " " + flags;
  TrainRun r;
  std::tie(r.status, r.output) = testing::run_command(command);
  r.losses = testing::read_losses(dir / "losses.txt");
  const std::regex eval("eval at step \\d+: masked-LM accuracy ([0-9.]+), masked-LM loss ([0-9.]+), nsp accuracy ([0-9.]+)");
  for (std::sregex_iterator i(r.output.begin(), r.output.end(), eval), end; i != end; ++i)
    for (int k = 1; k <= 3; ++k) r.evals.push_back(std::stod((*i)[k]));
  r.weights = dir / "ckpt/iter_0000010/model.safetensors";
  return r;
}

std::string environment(const fs::path& dir) {
  return "OMP_NUM_THREADS=1 KILN_TEST_LOSS_LOG=" + (dir / "losses.txt").string();
}

std::string mpirun(int processes, const fs::path& dir) { return testing::mpirun(processes, environment(dir)); }

TEST(MpiDataParallel, TwoRanksTrainBertLikeOneProcessAtTheSameGlobalBatch) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  KILN_REQUIRE_TEST_DATA();
  const fs::path root = testing::unique_temp_dir("mpi_data_parallel");
  const fs::path data = testing::prepared_mpi_bert_data(root);
  const TrainRun one = train("env " + environment(root / "one"), data, root / "one");
  const TrainRun two = train(mpirun(2, root / "two"), data, root / "two");
  const TrainRun overlapped = train(mpirun(2, root / "overlapped"), data, root / "overlapped",
                                    "--overlap-grad-reduce --ddp-bucket-size 100000");
  ASSERT_EQ(one.status, 0) << one.output;
  ASSERT_EQ(two.status, 0) << two.output;
  ASSERT_EQ(overlapped.status, 0) << overlapped.output;
  // On the simulated device the gradients, weights and losses cross between ranks through host
  // buffers (dist/staged_communicator.h): bitwise the host run.
  const TrainRun sim = train(mpirun(2, root / "sim"), data, root / "sim",
                             "--overlap-grad-reduce --ddp-bucket-size 100000 --device sim");
  ASSERT_EQ(sim.status, 0) << sim.output;
  EXPECT_EQ(sim.losses, overlapped.losses);
  EXPECT_EQ(sim.evals, overlapped.evals);

  EXPECT_NE(two.output.find("replicated parameters bitwise identical on 2 ranks"), std::string::npos) << two.output;
  // mpirun --bind-to none: each rank pins itself to its share of the cores (OMP_NUM_THREADS=1 here).
  EXPECT_NE(two.output.find("ranks: 2 (2 on this machine); rank 0: pinned by kiln to"), std::string::npos) << two.output;
  ASSERT_EQ(one.losses.size(), 10u) << one.output;
  ASSERT_EQ(two.losses.size(), 10u) << "rank 0 alone logs losses\n" << two.output;
  double loss_difference = 0;
  for (size_t i = 0; i < one.losses.size(); ++i) {
    EXPECT_NEAR(two.losses[i], one.losses[i], kLossTolerance * std::abs(one.losses[i])) << "step " << i + 1;
    loss_difference = std::max(loss_difference, std::abs(two.losses[i] - one.losses[i]) / std::abs(one.losses[i]));
  }
  // Evaluation is split across the ranks and its sums added: the same metrics, printed to 4 decimals.
  ASSERT_EQ(one.evals.size(), 6u) << one.output;
  ASSERT_EQ(two.evals.size(), 6u) << two.output;
  for (size_t i = 0; i < one.evals.size(); ++i) EXPECT_NEAR(two.evals[i], one.evals[i], 2e-4) << "evaluation value " << i;

  const io::SafetensorsFile a = io::SafetensorsFile::open(one.weights), b = io::SafetensorsFile::open(two.weights);
  ASSERT_EQ(a.names(), b.names());
  double largest = 0;
  for (const std::string& name : a.names()) {
    const std::vector<float> x = to_float_vector(a.get(name)), y = to_float_vector(b.get(name));
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) largest = std::max(largest, double(std::abs(x[i] - y[i])));
  }
  EXPECT_LE(largest, kWeightTolerance);
  // Buckets sum every element in rank order, as the one all-reduce does: not a bit differs.
  const std::regex buckets("gradient buckets: (\\d+) of >= 100000 elements, each all-reduced during backward");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(overlapped.output, match, buckets)) << overlapped.output;
  EXPECT_GT(std::stoi(match[1]), 2) << "bert-tiny's gradients should need several buckets";
  EXPECT_EQ(overlapped.losses, two.losses);
  const io::SafetensorsFile c = io::SafetensorsFile::open(overlapped.weights);
  const io::SafetensorsFile d = io::SafetensorsFile::open(sim.weights);
  for (const std::string& name : b.names()) {
    EXPECT_EQ(to_float_vector(c.get(name)), to_float_vector(b.get(name))) << name;
    EXPECT_EQ(to_float_vector(d.get(name)), to_float_vector(b.get(name))) << name << " on the simulated device";
  }
  std::cout << "largest relative loss difference " << loss_difference << ", largest weight difference after 10 "
            << "steps " << largest << "\n";
}

}  // namespace
}  // namespace kiln
