// Checkpoints across layouts: a tensor-parallel run (TP2) saves at step 5 and stops; its
// checkpoint, holding whole parameters, resumes as 2 pipeline stages (PP2), as 2 data-parallel
// ranks (DP2) and as one process; a TP2 x PP2 run's checkpoint resumes as one process and as
// DP2. Each continues with the losses of the one-process run that never stopped (bert-tiny, dropout on, same global batch and padded vocab). Skipped,
// saying why, without mpirun or when kiln was built without MPI. Label `mpi`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "tests/dist/mpi_bert_data.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// fp32 rounding: the layouts sum in other orders (measured in the TP and PP tests: losses within
// 2.3e-9 relative over 10 steps).
constexpr double kLossTolerance = 1e-6;  // relative, per step

struct TrainRun {
  int status = 0;
  std::string output;
  std::vector<std::pair<int, double>> losses;  // (step, loss) as rank 0 logged them
};

// Every layout pads the vocabulary to 30720 (--make-vocab-size-divisible-by x TP = 256).
TrainRun train(int processes, const std::string& layout, const fs::path& data, const fs::path& dir, const std::string& extra) {
  fs::create_directories(dir);
  const std::string env = "OMP_NUM_THREADS=1 KILN_TEST_LOSS_LOG=" + (dir / "losses.txt").string();
  const std::string launcher = processes == 1 ? "env " + env : testing::mpirun(processes, env);
  const std::string command =
      launcher + " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --data " +
      data.string() + " --vocab " + testing::test_vocab().string() +
      " --global-batch-size 8 --micro-batch-size 2 --train-iters 10 --eval-interval 10 --eval-iters 1"
      " --eval-batch-size 8 --save-interval 5 " + layout + " --output-dir " + dir.string() + " " + extra;
  TrainRun r;
  std::tie(r.status, r.output) = testing::run_command(command);
  r.losses = testing::read_loss_log(dir / "losses.txt");
  return r;
}

void expect_continues(const TrainRun& whole, const TrainRun& resumed, const std::string& layout) {
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 5u) << layout << "\n" << resumed.output;
  for (const auto& [step, loss] : resumed.losses) {
    const double expected = whole.losses.at(size_t(step - 1)).second;
    EXPECT_NEAR(loss, expected, kLossTolerance * std::abs(expected)) << layout << " step " << step;
  }
}

// The data and the uninterrupted one-process run, shared by the tests.
class MpiLayoutCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::mpi_missing().empty() || !fs::exists(testing::test_vocab())) return;
    root_ = testing::unique_temp_dir("mpi_layout_checkpoint");
    data_ = testing::prepared_mpi_bert_data(root_);
    whole_ = new TrainRun(train(1, kPad256, data_, root_ / "whole", "--save " + (root_ / "whole/ckpt").string()));
  }
  static void TearDownTestSuite() { delete whole_; }

  void SetUp() override {
    if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
    KILN_REQUIRE_TEST_DATA();
    ASSERT_EQ(whole_->status, 0) << whole_->output;
    ASSERT_EQ(whole_->losses.size(), 10u) << whole_->output;
  }

  // Trains `processes` ranks in `layout` for 5 steps into root/name, saving at step 5.
  void save(int processes, const std::string& name, const std::string& layout) {
    const fs::path saved = root_ / name / "ckpt";
    const TrainRun run = train(processes, layout, data_, root_ / name, "--exit-interval 5 --save " + saved.string());
    ASSERT_EQ(run.status, 0) << run.output;
    ASSERT_TRUE(fs::exists(saved / "iter_0000005/model.safetensors")) << run.output;
  }

  // Resumes the checkpoint saved in root/saved_name in each (processes, name, layout).
  void expect_resumes(const std::string& saved_name,
                      const std::vector<std::tuple<int, std::string, std::string>>& layouts) {
    for (const auto& [processes, name, layout] : layouts) {
      // The saving run's folder: its checkpoint and the MLPerf log that the resumed run continues.
      const fs::path dir = root_ / (saved_name + "_as_" + name);
      fs::copy(root_ / saved_name, dir, fs::copy_options::recursive);
      fs::remove(dir / "losses.txt");
      const std::string ckpt = (dir / "ckpt").string();
      expect_continues(*whole_, train(processes, layout, data_, dir, "--save " + ckpt + " --load " + ckpt),
                       saved_name + " as " + name);
    }
  }

  static inline const std::string kPad256 = "--make-vocab-size-divisible-by 256";
  static inline fs::path root_, data_;
  static inline TrainRun* whole_ = nullptr;
};

TEST_F(MpiLayoutCheckpoint, ATensorParallelCheckpointResumesAsPipelineDataParallelAndOneProcess) {
  ASSERT_NO_FATAL_FAILURE(save(2, "tp2", "--tensor-model-parallel-size 2 --make-vocab-size-divisible-by 128"));
  expect_resumes("tp2", {{2, "pp2", "--pipeline-model-parallel-size 2 " + kPad256}, {2, "dp2", kPad256},
                         {1, "one", kPad256}});
}

TEST_F(MpiLayoutCheckpoint, ATensorTimesPipelineParallelCheckpointResumesInOneProcessAndDataParallel) {
  ASSERT_NO_FATAL_FAILURE(save(4, "tp2pp2",
                               "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                               "--make-vocab-size-divisible-by 128"));
  expect_resumes("tp2pp2", {{1, "one", kPad256}, {2, "dp2", kPad256}});
}

}  // namespace
}  // namespace kiln
