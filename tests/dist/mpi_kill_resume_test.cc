// Kill drills across two ranks: under mpirun, one rank SIGKILLed in the middle of a step, the
// writing rank (0) SIGKILLed inside a checkpoint save at a given phase, or rank 1 SIGKILLed while
// rank 0 saves. Each time the job ends on every rank with a non-zero status (not hung: `timeout`
// would end it with 124), and the run resumed on two ranks from what is left on disk ends
// bitwise as an uninterrupted two-rank run: the loss of every step from the resumed one to the
// end (KILN_TEST_LOSS_LOG, exact hexadecimal floats), every rank's final weights
// (KILN_TEST_PARAMS_DIR) and the final checkpoint's files. The steps the killed run completed
// gave the uninterrupted run's losses too. Skipped without mpirun. Label `mpi`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/exact_losses.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

constexpr int kTrainIters = 8, kSaveInterval = 3;
// `timeout` ends the whole mpirun with status 124 if any rank is left waiting.
constexpr int kHungStatus = 124;

// A two-rank BERT run in `dir` (--save and --load dir/ckpt) with `env` added for both ranks;
// rank 0's losses go to dir/LOSSES, every rank's final weights to dir/params/.
std::pair<int, std::string> two_ranks(const fs::path& dir, const std::string& losses, const std::string& env) {
  fs::create_directories(dir / "params");
  return testing::run_command(
      "timeout 120 " +
      testing::mpirun(2, "OMP_NUM_THREADS=1 KILN_TEST_LOSS_LOG=" + (dir / losses).string() +
                             " KILN_TEST_PARAMS_DIR=" + (dir / "params").string() + (env.empty() ? "" : " " + env)) +
      " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --fake-data --seq-length 32"
      " --global-batch-size 4 --micro-batch-size 2 --train-iters " + std::to_string(kTrainIters) +
      " --eval-interval 100 --save-interval " + std::to_string(kSaveInterval) + " --dist-timeout 30"
      " --save " + (dir / "ckpt").string() + " --load " + (dir / "ckpt").string() + " --output-dir " + dir.string());
}

int64_t latest_step(const fs::path& ckpt) {
  const auto latest = fs::exists(ckpt) ? io::latest_checkpoint(ckpt) : std::nullopt;
  return latest ? io::CheckpointMeta::read(*latest).integer("step") : 0;
}

// The uninterrupted two-rank run in `root`/reference.
struct Reference {
  fs::path dir;
  std::map<int64_t, std::string> losses;
};
Reference reference_run(const fs::path& root) {
  Reference r{root / "reference", {}};
  const auto [status, output] = two_ranks(r.dir, "losses.txt", "");
  EXPECT_EQ(status, 0) << output;
  r.losses = testing::read_exact_losses(r.dir / "losses.txt");
  EXPECT_EQ(r.losses.size(), size_t(kTrainIters)) << output;
  return r;
}

// Kills a two-rank run in `root`/NAME as `failure` (environment for both ranks) says, resumes it
// there on two ranks, and compares everything with `ref`. `expected_message`: what the dying rank
// prints (its hook's line), when it prints one. Returns the step the resume started at.
int64_t kill_and_resume(const Reference& ref, const fs::path& root, const std::string& name, const std::string& failure,
                        const std::string& expected_message) {
  SCOPED_TRACE(name + ": " + failure);
  const std::map<int64_t, std::string>& reference = ref.losses;
  const fs::path dir = root / name;
  const auto [status, output] = two_ranks(dir, "killed_losses.txt", failure);
  EXPECT_NE(status, 0) << "the failure did not end the run\n" << output;
  EXPECT_NE(status, kHungStatus) << "a rank was left waiting\n" << output;
  if (!expected_message.empty()) {
    EXPECT_NE(output.find(expected_message), std::string::npos) << output;
  }
  // The steps it completed before the kill gave the uninterrupted run's losses.
  for (const auto& [step, loss] : testing::read_exact_losses(dir / "killed_losses.txt")) {
    const auto it = reference.find(step);
    EXPECT_TRUE(it != reference.end() && it->second == loss) << "step " << step << " of the killed run: " << loss;
  }

  const int64_t resumed_at = latest_step(dir / "ckpt");
  EXPECT_LT(resumed_at, kTrainIters) << output;
  fs::remove_all(dir / "params");
  const auto [resumed, resumed_output] = two_ranks(dir, "resumed_losses.txt", "");
  EXPECT_EQ(resumed, 0) << resumed_output;
  if (resumed_at > 0) {
    EXPECT_NE(resumed_output.find(fmt::format("iter_{:07d} at step {}", resumed_at, resumed_at)), std::string::npos)
        << resumed_output;
  }

  // Losses of the resumed steps, bit for bit.
  std::map<int64_t, std::string> expected;
  for (const auto& [step, loss] : reference)
    if (step > resumed_at) expected[step] = loss;
  EXPECT_EQ(testing::read_exact_losses(dir / "resumed_losses.txt"), expected) << resumed_output;
  // Every rank's final weights, and the final checkpoint's files, byte for byte.
  const auto same_bytes = [&](const fs::path& file, const fs::path& reference_file) {
    if (!fs::exists(file) || !fs::exists(reference_file)) {
      ADD_FAILURE() << file << " or " << reference_file << " missing\n" << resumed_output;
      return;
    }
    EXPECT_TRUE(read_file(file) == read_file(reference_file)) << file << " differs from " << reference_file;
  };
  for (const char* rank : {"rank0.safetensors", "rank1.safetensors"})
    same_bytes(dir / "params" / rank, ref.dir / "params" / rank);
  const std::string last = fmt::format("iter_{:07d}", kTrainIters);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    same_bytes(dir / "ckpt" / last / file, ref.dir / "ckpt" / last / file);
  return resumed_at;
}

// Rank 1 dies at the start of step 5, while rank 0 is inside it: the resume starts from step 3.
TEST(MpiKillResume, Rank1KilledMidStepThenTheTwoRankResumeIsBitwiseTheUninterruptedRun) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path root = testing::unique_temp_dir("mpi_kill_mid_step");
  const Reference ref = reference_run(root);
  EXPECT_EQ(kill_and_resume(ref, root, "killed", "KILN_TEST_RANK_FAILS=1:5:kill",
                            "KILN_TEST_RANK_FAILS: rank 1 is killed at step 5"),
            3);
}

// Rank 0, the only one that writes, dies inside the save of step 6: once after publishing the
// folder, before the pointer names it (the resume starts from step 3 and saves step 6 again over
// the published folder), once after the pointer, before pruning (the resume starts from step 6).
TEST(MpiKillResume, Rank0KilledInsideASaveThenTheTwoRankResumeIsBitwiseTheUninterruptedRun) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path root = testing::unique_temp_dir("mpi_kill_in_save");
  const Reference ref = reference_run(root);
  EXPECT_EQ(kill_and_resume(ref, root, "publish", "KILN_TEST_KILL_IN_SAVE=6:publish", ""), 3);
  EXPECT_EQ(kill_and_resume(ref, root, "pointer", "KILN_TEST_KILL_IN_SAVE=6:pointer", ""), 6);
}

// Rank 1 dies as the save of step 6 begins, while rank 0 writes it (slowed by 2 s, as a slow
// filesystem would, so that the launcher usually ends rank 0 inside its save; should rank 0
// finish first, the resume starts from step 6 instead of 3, as valid).
TEST(MpiKillResume, Rank1KilledWhileRank0SavesThenTheTwoRankResumeIsBitwiseTheUninterruptedRun) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path root = testing::unique_temp_dir("mpi_kill_during_save");
  const Reference ref = reference_run(root);
  const int64_t resumed_at =
      kill_and_resume(ref, root, "killed", "KILN_TEST_RANK_FAILS=1:6:save KILN_TEST_SAVE_SECONDS=2",
                      "KILN_TEST_RANK_FAILS: rank 1 is killed in the save of step 6");
  EXPECT_TRUE(resumed_at == 3 || resumed_at == 6) << resumed_at;
}

}  // namespace
}  // namespace kiln
