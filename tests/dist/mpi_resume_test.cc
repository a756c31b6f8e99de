// One resume decision for all ranks (train/resume.h): each rank reports the checkpoint it finds in
// --load and the contents of its files, and the run stops on every rank, naming the first rank
// that differs and both views, unless all agree. Each rank here gets its own folder
// (--load DIR/rank$OMPI_COMM_WORLD_RANK), as node-local folders would be.
// Skipped, saying why, without mpirun or when kiln was built without MPI. Label `mpi`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/dist/mpi_bert_data.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

std::string bert(const fs::path& data, const fs::path& out) {
  return " " KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --data " + data.string() +
         " --vocab " + testing::test_vocab().string() +
         " --global-batch-size 4 --micro-batch-size 2 --train-iters 4 --eval-interval 100 --eval-iters 1"
         " --save-interval 2 --dist-timeout 60 --output-dir " + out.string();
}

// Two ranks, rank r loading `loads`/rank<r>, continuing the MLPerf log in `out`.
std::pair<int, std::string> resume_on_two_ranks(const fs::path& data, const fs::path& out, const fs::path& loads) {
  return testing::run_command(testing::mpirun(2, "OMP_NUM_THREADS=1") + " sh -c '" + bert(data, out) + " --load " +
                              loads.string() + "/rank$OMPI_COMM_WORLD_RANK'");
}

void flip_a_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-100, std::ios::end);
  const char c = char(f.get() ^ 0x5a);
  f.seekp(-100, std::ios::end);
  f.put(c);
}

TEST(MpiResume, RanksThatSeeDifferentCheckpointsStopNamingTheRankAndBothViews) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  KILN_REQUIRE_TEST_DATA();
  const fs::path root = testing::unique_temp_dir("mpi_resume");
  const fs::path data = testing::prepared_mpi_bert_data(root);
  const auto [saved, saved_out] = testing::run_command(
      "OMP_NUM_THREADS=1" + bert(data, root / "first") + " --save " + (root / "ckpt").string() + " --exit-interval 2");
  ASSERT_EQ(saved, 0) << saved_out;
  const auto copy_to = [&](const fs::path& dir) {
    fs::create_directories(dir.parent_path());
    fs::copy(root / "ckpt", dir, fs::copy_options::recursive);
  };

  // The same checkpoint on both ranks: the run resumes at step 2 on both.
  copy_to(root / "same/rank0");
  copy_to(root / "same/rank1");
  const auto [same, same_out] = resume_on_two_ranks(data, root / "first", root / "same");
  EXPECT_EQ(same, 0) << same_out;
  EXPECT_NE(same_out.find("at step 2"), std::string::npos) << same_out;

  // A missing folder on rank 1.
  copy_to(root / "missing/rank0");
  const auto [missing, missing_out] = resume_on_two_ranks(data, root / "first", root / "missing");
  EXPECT_NE(missing, 0);
  EXPECT_NE(missing_out.find("resume: rank 1 sees --load " + (root / "missing/rank1").string() +
                             " does not exist, but rank 0 sees checkpoint iter_0000002 at step 2 (model.safetensors "),
            std::string::npos)
      << missing_out;

  // A damaged copy on rank 1 (one byte of its weights changed).
  copy_to(root / "other/rank0");
  copy_to(root / "other/rank1");
  flip_a_byte(root / "other/rank1/iter_0000002/model.safetensors");
  const auto [damaged, damaged_out] = resume_on_two_ranks(data, root / "first", root / "other");
  EXPECT_NE(damaged, 0);
  EXPECT_NE(damaged_out.find("resume: rank 1 sees "), std::string::npos) << damaged_out;
  EXPECT_NE(damaged_out.find("every rank must resume from the same checkpoint"), std::string::npos) << damaged_out;
  EXPECT_EQ(damaged_out.find("training BERT"), std::string::npos) << "no rank may start training: " << damaged_out;
}

}  // namespace
}  // namespace kiln
