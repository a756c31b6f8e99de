// examples/bert/train_bert_340m_distributed.sh, the distributed example a Megatron-LM user starts
// from, run as a user would on two processes at a tiny size (its flags override the 340M shape).
// Skipped, saying why, without mpirun or when kiln was built without MPI. Label `mpi`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"
#include "tests/train/megatron_test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

TEST(MpiExamples, DistributedBertExampleTrainsOnTwoRanksAndSavesTheRun) {
  if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  KILN_REQUIRE_TEST_DATA();
  const fs::path dir = testing::unique_temp_dir("mpi_examples");
  const std::string data = testing::prepare_indexed(testing::sotu_jsonl(dir), dir / "sotu");
  const std::string command =
      "GPUS_PER_NODE=2 OMP_NUM_THREADS=1 MPIRUN_ARGS='--oversubscribe -x OMP_NUM_THREADS' KILN=" KILN_BINARY
      " " KILN_SOURCE_DIR "/examples/bert/train_bert_340m_distributed.sh " + (dir / "ckpt").string() + " " +
      (dir / "tb").string() + " " + testing::test_vocab().string() + " " + data +
      " --num-layers 2 --hidden-size 64 --num-attention-heads 2 --ffn-hidden-size 256 --seq-length 64"
      " --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --eval-interval 3 --eval-iters 1"
      " --log-interval 1 --save-interval 3 --split 90,5,5 --output-dir " + (dir / "run").string();
  const auto [status, output] = testing::run_command(command);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("ranks: 2"), std::string::npos) << output;
  EXPECT_NE(output.find("(micro 2 x 1 x 2 data-parallel)"), std::string::npos) << output;
  EXPECT_NE(output.find(" iteration        3/       3 |"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "iter_0000003")) << output;
  EXPECT_FALSE(fs::is_empty(dir / "tb")) << output;
}

}  // namespace
}  // namespace kiln
