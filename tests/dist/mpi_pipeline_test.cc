// `mpirun -np 2 kiln train bert --pipeline-model-parallel-size 2` (PP2), `mpirun -np 4 ...`
// (PP2 x DP2), `mpirun -np 4 ... --pipeline-model-parallel-size 4` (PP4) and PP2 interleaved
// (--num-layers-per-virtual-pipeline-stage 1, alone and x DP2) against one process
// at the same global batch: bert-tiny with 4 layers, dropout on, 10 steps, global batch 8 in
// micro-batches of 2 (4 per pipeline and step, so the 1F1B schedule keeps several in flight on
// the first stages). The same
// losses, evaluations and final weights within fp32 rounding; the first and last stage's copies
// of the tied word embedding bitwise identical. PP2 x DP2 reduces its gradients in buckets during
// backward (--overlap-grad-reduce), which must not start on the last stage's copy of the word
// embedding before the embedding group has summed it. Skipped, saying why, without mpirun or MPI.
// Label `mpi`.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
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

// fp32 rounding: the tied embedding's two gradient halves are added in another order, and the
// data-parallel sum too. Measured on 2026-11-30 (OMP_NUM_THREADS=1): losses within 2.3e-9
// relative (PP2, PP4) and 1.9e-9 (PP2 x DP2), weights within 1.2e-7 absolute (all three).
constexpr double kLossTolerance = 1e-6;    // relative, per step
constexpr double kWeightTolerance = 1e-5;  // absolute, largest over all weights
const std::string kWord = "bert.embeddings.word_embeddings.weight";

struct TrainRun {
  int status = 0;
  std::string output;
  std::vector<double> losses;
  std::vector<double> evals;  // masked-LM accuracy and loss, NSP accuracy of each evaluation, as printed
  std::vector<io::SafetensorsFile> ranks;  // each rank's parameters, by world rank
};

std::string environment(const fs::path& dir) {
  return "OMP_NUM_THREADS=1 KILN_TEST_LOSS_LOG=" + (dir / "losses.txt").string() +
         " KILN_TEST_PARAMS_DIR=" + dir.string();
}

TrainRun train(int processes, int stages, const fs::path& data, const fs::path& dir, const std::string& extra = "") {
  fs::create_directories(dir);
  const std::string launcher =
      processes == 1 ? "env " + environment(dir) : testing::mpirun(processes, environment(dir));
  const std::string command =
      launcher + " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --data " +
      data.string() + " --vocab " + testing::test_vocab().string() +
      " --num-layers 4 --global-batch-size 8 --micro-batch-size 2 --train-iters 10 --eval-interval 5"
      " --eval-iters 4 --eval-batch-size 8 --output-dir " + dir.string() +
      " --pipeline-model-parallel-size " + std::to_string(stages) + " " + extra;
  TrainRun r;
  std::tie(r.status, r.output) = testing::run_command(command);
  r.losses = testing::read_losses(dir / "losses.txt");
  const std::regex eval("eval at step \\d+: masked-LM accuracy ([0-9.]+), masked-LM loss ([0-9.]+), nsp accuracy ([0-9.]+)");
  for (std::sregex_iterator i(r.output.begin(), r.output.end(), eval), end; i != end; ++i)
    for (int k = 1; k <= 3; ++k) r.evals.push_back(std::stod((*i)[k]));
  for (int k = 0; k < processes && r.status == 0; ++k)
    r.ranks.push_back(io::SafetensorsFile::open(dir / ("rank" + std::to_string(k) + ".safetensors")));
  return r;
}

std::vector<float> values(const io::SafetensorsFile& f, const std::string& name) {
  return to_float_vector(f.get(name));
}

// Compares a pipeline run with the one-process run; returns the largest weight difference and
// the largest relative loss difference.
std::pair<double, double> expect_same_training(const TrainRun& one, const TrainRun& pp, int stages) {
  const int pipelines = int(pp.ranks.size()) / stages;
  EXPECT_EQ(pp.losses.size(), 10u) << "rank 0 alone logs losses\n" << pp.output;
  double loss_difference = 0;
  for (size_t i = 0; i < one.losses.size() && i < pp.losses.size(); ++i) {
    EXPECT_NEAR(pp.losses[i], one.losses[i], kLossTolerance * std::abs(one.losses[i])) << "step " << i + 1;
    loss_difference = std::max(loss_difference, std::abs(pp.losses[i] - one.losses[i]) / std::abs(one.losses[i]));
  }
  EXPECT_EQ(pp.evals.size(), 6u) << pp.output;
  for (size_t i = 0; i < one.evals.size() && i < pp.evals.size(); ++i)
    EXPECT_NEAR(pp.evals[i], one.evals[i], 2e-4) << "evaluation value " << i;

  // World rank = dp + pipelines x stage: the first stage holds the embeddings, the last the heads.
  std::map<std::string, int> seen;
  double largest = 0;
  for (size_t rank = 0; rank < pp.ranks.size(); ++rank)
    for (const std::string& name : pp.ranks[rank].names()) {
      ++seen[name];
      const std::vector<float> want = values(one.ranks[0], name), got = values(pp.ranks[rank], name);
      EXPECT_EQ(got.size(), want.size()) << name;
      for (size_t i = 0; i < got.size() && i < want.size(); ++i)
        largest = std::max(largest, double(std::abs(got[i] - want[i])));
    }
  for (const std::string& name : one.ranks[0].names())
    EXPECT_EQ(seen[name], name == kWord ? 2 * pipelines : pipelines) << name;
  for (int first = 0; first < pipelines; ++first)
    EXPECT_EQ(values(pp.ranks[size_t(first)], kWord),
              values(pp.ranks[size_t(first + pipelines * (stages - 1))], kWord))
        << "the tied word embedding's copies on the first and last stage of pipeline " << first;
  EXPECT_LE(largest, kWeightTolerance);
  return {largest, loss_difference};
}

// The data and the one-process run, shared by the layouts' tests.
class MpiPipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::mpi_missing().empty() || !fs::exists(testing::test_vocab())) return;
    root_ = testing::unique_temp_dir("mpi_pipeline");
    data_ = testing::prepared_mpi_bert_data(root_);
    one_ = new TrainRun(train(1, 1, data_, root_ / "one"));
  }
  static void TearDownTestSuite() { delete one_; }

  void compare(int processes, int stages, const std::string& extra = "") {
    if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
    KILN_REQUIRE_TEST_DATA();
    ASSERT_EQ(one_->status, 0) << one_->output;
    ASSERT_EQ(one_->losses.size(), 10u) << one_->output;
    ASSERT_EQ(one_->evals.size(), 6u) << one_->output;
    const fs::path dir = root_ / fmt::format("pp{}x{}-{}", stages, processes / stages, ++runs_);
    const TrainRun pp = train(processes, stages, data_, dir, extra);
    ASSERT_EQ(pp.status, 0) << pp.output;
    ASSERT_EQ(pp.ranks.size(), size_t(processes));
    const auto [weights, losses] = expect_same_training(*one_, pp, stages);
    std::cout << fmt::format("PP{} x DP{}: largest relative loss difference {:.3g}, largest weight difference "
                             "after 10 steps {:.3g}\n", stages, processes / stages, losses, weights);
  }

  static inline fs::path root_, data_;
  static inline TrainRun* one_ = nullptr;
  static inline int runs_ = 0;
};

TEST_F(MpiPipeline, TwoStagesTrainBertLikeOneProcess) { compare(2, 2); }
TEST_F(MpiPipeline, TwoDataParallelPipelinesOfTwoStagesTrainBertLikeOneProcess) {
  compare(4, 2, "--overlap-grad-reduce --ddp-bucket-size 50000");
}
// Middle stages, and 3 warm-up forwards on the first stage.
TEST_F(MpiPipeline, FourStagesTrainBertLikeOneProcess) { compare(4, 4); }
// Interleaved 1F1B: 2 model chunks of one layer per stage, the activations twice round the ring;
// with 2 pipelines, gradient buckets start as each chunk's last micro-batch finishes backward.
TEST_F(MpiPipeline, TwoStagesOfTwoInterleavedChunksTrainBertLikeOneProcess) {
  compare(2, 2, "--num-layers-per-virtual-pipeline-stage 1");
  compare(4, 2, "--num-layers-per-virtual-pipeline-stage 1 --overlap-grad-reduce --ddp-bucket-size 50000");
}
// The interleaved pipeline's checkpoint holds whole, named parameters: saved at step 5 and resumed
// in one process, it continues with the one-process run's losses.
TEST_F(MpiPipeline, AnInterleavedPipelinesCheckpointResumesInOneProcess) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  KILN_REQUIRE_TEST_DATA();
  ASSERT_EQ(one_->losses.size(), 10u) << one_->output;
  const fs::path dir = root_ / "interleaved_checkpoint", ckpt = dir / "ckpt";
  const TrainRun saved = train(2, 2, data_, dir,
                               "--num-layers-per-virtual-pipeline-stage 1 --exit-interval 5 --save " + ckpt.string());
  ASSERT_EQ(saved.status, 0) << saved.output;
  fs::remove(dir / "losses.txt");
  const TrainRun resumed = train(1, 1, data_, dir, "--load " + ckpt.string());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 5u) << resumed.output;
  for (size_t i = 0; i < 5; ++i)
    EXPECT_NEAR(resumed.losses[i], one_->losses[i + 5], kLossTolerance * std::abs(one_->losses[i + 5])) << "step " << i + 6;
}
// Full recomputation in every stage instance of the 1F1B schedule: each layer alone (uniform), and
// the first layer of each stage over the second's buffers (block).
TEST_F(MpiPipeline, TwoStagesRecomputingFullLayersTrainBertLikeOneProcess) {
  compare(2, 2, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  compare(2, 2, "--recompute-granularity full --recompute-method block --recompute-num-layers 1");
}

}  // namespace
}  // namespace kiln
