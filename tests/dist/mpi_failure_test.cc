// A rank that dies or hangs must not leave the others waiting: under mpirun, killing one rank
// mid-run or making it hang outside any collective ends every rank with a non-zero status
// (`--dist-timeout` for the hang), and the last checkpoint stays loadable. Label `mpi`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kiln/io/checkpoint.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// `timeout` ends the whole mpirun with status 124 if any rank is left waiting.
constexpr int kHungStatus = 124;

std::pair<int, std::string> train_two_ranks(const std::string& failure, const fs::path& dir, const std::string& flags) {
  const std::string command =
      "timeout 240 " + testing::mpirun(2, "OMP_NUM_THREADS=1 KILN_TEST_RANK_FAILS=" + failure) +
      " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --fake-data"
      " --seq-length 32 --global-batch-size 4 --micro-batch-size 2 --train-iters 8 --eval-interval 100"
      " --save-interval 3 --save " + (dir / "ckpt").string() + " --output-dir " + dir.string() + " " + flags;
  return testing::run_command(command);
}

TEST(MpiFailure, AKilledRankEndsEveryRankAndTheLastCheckpointStaysLoadable) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = testing::unique_temp_dir("mpi_kill");
  const auto [status, output] = train_two_ranks("1:5:kill", dir, "");
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(status, kHungStatus) << "a rank was left waiting\n" << output;
  EXPECT_NE(output.find("KILN_TEST_RANK_FAILS: rank 1 is killed at step 5"), std::string::npos) << output;

  const auto latest = io::latest_checkpoint(dir / "ckpt");
  ASSERT_TRUE(latest.has_value()) << output;
  EXPECT_EQ(latest->filename(), "iter_0000003");
  const auto [resumed, resumed_output] = testing::run_command(
      "OMP_NUM_THREADS=1 " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --fake-data"
      " --seq-length 32 --global-batch-size 4 --micro-batch-size 2 --train-iters 8 --eval-interval 100"
      " --load " + (dir / "ckpt").string() + " --output-dir " + dir.string());
  EXPECT_EQ(resumed, 0) << resumed_output;
  EXPECT_NE(resumed_output.find("iter_0000003 at step 3"), std::string::npos) << resumed_output;
}

TEST(MpiFailure, AHungRankEndsEveryRankAfterTheDistTimeoutNamingTheCollective) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = testing::unique_temp_dir("mpi_hang");
  const auto [status, output] = train_two_ranks("1:4:hang", dir, "--dist-timeout 5");
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(status, kHungStatus) << "a rank was left waiting\n" << output;
  EXPECT_NE(output.find("KILN_TEST_RANK_FAILS: rank 1 hangs at step 4"), std::string::npos) << output;
  EXPECT_NE(output.find("kiln: rank 0: error: all_reduce_sum waited more than 5 s for the other ranks (--dist-timeout)"),
            std::string::npos)
      << output;
}

// A save that takes longer than --dist-timeout (rank 0 writes, rank 1 waits for it) is not a
// failure: the ranks wait for each other up to --save-timeout across a save instead.
TEST(MpiFailure, ASaveLongerThanTheDistTimeoutIsWaitedForUpToTheSaveTimeout) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = testing::unique_temp_dir("mpi_slow_save");
  const auto train = [&](const std::string& name, const std::string& flags) {
    return testing::run_command(
        "timeout 240 " + testing::mpirun(2, "OMP_NUM_THREADS=1 KILN_TEST_SAVE_SECONDS=4") +
        " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --fake-data"
        " --seq-length 32 --global-batch-size 4 --micro-batch-size 2 --train-iters 4 --eval-interval 100"
        " --save-interval 2 --dist-timeout 2 --save " + (dir / name / "ckpt").string() + " --output-dir " +
        (dir / name).string() + " " + flags);
  };
  const auto [status, output] = train("waited", "");
  EXPECT_EQ(status, 0) << output;
  EXPECT_TRUE(fs::exists(dir / "waited/ckpt/iter_0000004")) << output;
  // With a save limit below the save's time, the waiting rank ends the run, naming the limit.
  const auto [short_status, short_output] = train("limited", "--save-timeout 1");
  EXPECT_NE(short_status, 0) << short_output;
  EXPECT_NE(short_status, kHungStatus) << short_output;
  EXPECT_NE(short_output.find("waited more than 1 s for the other ranks"), std::string::npos) << short_output;
}

TEST(MpiFailure, TheRankFailureHookRejectsAMalformedValue) {
  const fs::path dir = testing::unique_temp_dir("rank_fails_hook");
  const auto [status, output] = testing::run_command(
      "KILN_TEST_RANK_FAILS=1:x " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml"
      " --fake-data --seq-length 32 --train-iters 1 --output-dir " + dir.string());
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("KILN_TEST_RANK_FAILS: expected RANK:STEP:kill, RANK:STEP:hang or RANK:STEP:save, got '1:x'"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace kiln
