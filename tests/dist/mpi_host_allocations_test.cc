// Host allocations of a training step under mpirun, in every parallel layout: data parallel (with
// and without buckets reduced during backward), tensor parallel, the distributed optimizer
// (ZeRO-1), the 1F1B pipeline plain and interleaved, and ResNet data parallel with SyncBN. kiln runs under
// libkiln_alloc_count.so (tools/alloc_count/), which counts each rank's operator new calls by the
// caller's library. Runs of 6 and 12 steps then differ by what steps 7..12 allocate; kiln's share
// must not change. bert-tiny reads data through its loader (`kiln prepare bert` output). A control
// run prints a console line every step, which formats text: there the counter must see more
// with more steps. Skipped, saying why, without mpirun or MPI. Label `mpi`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/dist/mpi_bert_data.h"
#include "tests/dist/mpi_test_util.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// One rank's operator new calls over a whole run, by the caller's library.
struct RankNews {
  long long kiln = -1, onednn = -1, openmp = -1, mpi = -1;
};

std::vector<RankNews> read_counts(const fs::path& dir, int processes) {
  std::vector<RankNews> ranks(processes);
  for (int r = 0; r < processes; ++r) {
    std::ifstream in(dir / ("rank" + std::to_string(r) + ".txt"));
    std::string name;
    in >> name >> ranks[r].kiln >> name >> ranks[r].onednn >> name >> ranks[r].openmp >> name >> ranks[r].mpi;
  }
  return ranks;
}

// `kiln train MODEL_FLAGS STEPS_FLAG steps` on 2 ranks under the counter; each rank's counts.
std::vector<RankNews> count_run(const fs::path& dir, const std::string& model_flags, const std::string& steps_flag,
                                int steps) {
  // Each run its own folders: the first run to create a folder allocates for it.
  const fs::path counts = dir / ("counts" + std::to_string(steps)), out = dir / ("out" + std::to_string(steps));
  fs::create_directories(counts);
  const std::string command = testing::mpirun(2, "OMP_NUM_THREADS=1 KILN_ALLOC_COUNT_DIR=" + counts.string()) +
                              " -x LD_PRELOAD=" KILN_ALLOC_COUNT_LIBRARY " " KILN_BINARY " train " + model_flags +
                              " --output-dir " + out.string() + " " + steps_flag + " " +
                              std::to_string(steps);
  const auto [status, output] = testing::run_command(command);
  EXPECT_EQ(status, 0) << command << "\n" << output;
  return read_counts(counts, 2);
}

struct Growth {
  std::vector<RankNews> short_run, long_run;
};

Growth count_6_and_12_steps(const fs::path& dir, const std::string& model_flags, const std::string& steps_flag) {
  return {count_run(dir, model_flags, steps_flag, 6), count_run(dir, model_flags, steps_flag, 12)};
}

void expect_steps_allocate_nothing(const Growth& g, const std::string& layout) {
  SCOPED_TRACE(layout);
  for (int r = 0; r < 2; ++r) {
    const RankNews &a = g.short_run[r], &b = g.long_run[r];
    EXPECT_GT(a.kiln, 0) << "rank " << r << ": the counter saw nothing";
    EXPECT_EQ(b.kiln, a.kiln) << "rank " << r << ": steps 7..12 allocated in kiln's code";
    std::printf("[ host news ] %s, rank %d: kiln %lld / %lld, oneDNN %lld / %lld, OpenMP %lld / %lld, MPI %lld / %lld "
                "(6 / 12 steps)\n",
                layout.c_str(), r, a.kiln, b.kiln, a.onednn, b.onednn, a.openmp, b.openmp, a.mpi, b.mpi);
  }
}

class MpiHostAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::mpi_missing(); !why.empty()) GTEST_SKIP() << why;
  }
  // The suite's BERT corpus, prepared once.
  static const fs::path& corpus() {
    static const fs::path data = testing::prepared_mpi_bert_data(testing::unique_temp_dir("host_news_corpus"));
    return data;
  }
  static std::string bert_flags(const std::string& layout, int log_interval = 1000) {
    return "bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --data " + corpus().string() + " --vocab " +
           testing::test_vocab().string() +
           " --global-batch-size 8 --micro-batch-size 2 --eval-interval 1000 --eval-iters 1"
           " --eval-batch-size 8 --log-interval " + std::to_string(log_interval) + " " + layout;
  }
  const fs::path tmp_ = testing::unique_temp_path(
      std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_host_news");
};

TEST_F(MpiHostAllocations, BertStepsAllocateNothingInEveryLayout) {
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"data parallel", "--num-layers 2"},
      {"data parallel, buckets during backward", "--num-layers 2 --overlap-grad-reduce"},
      {"tensor parallel", "--num-layers 2 --tensor-model-parallel-size 2"},
      {"distributed optimizer", "--num-layers 2 --use-distributed-optimizer"},
      {"pipeline", "--num-layers 2 --pipeline-model-parallel-size 2"},
      {"interleaved pipeline",
       "--num-layers 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"},
  };
  for (size_t i = 0; i < layouts.size(); ++i)
    expect_steps_allocate_nothing(
        count_6_and_12_steps(tmp_ / std::to_string(i), bert_flags(layouts[i].second), "--train-iters"),
        layouts[i].first);
}

TEST_F(MpiHostAllocations, ResNetSyncBnStepsAllocateNothing) {
  expect_steps_allocate_nothing(
      count_6_and_12_steps(tmp_,
                           "resnet --arch resnet18 --width 8 --small-images --fake-data --image-size 28 "
                           "--eval-resize 28 --batch-size 16 --sync-bn --overlap-grad-reduce --log-interval 1000",
                           "--benchmark"),
      "ResNet data parallel, SyncBN");
}

// The comparison sees a per-step allocation: a console line every step formats its text.
TEST_F(MpiHostAllocations, ConsoleLineEveryStepIsSeen) {
  const Growth g = count_6_and_12_steps(tmp_ / "run", bert_flags("--num-layers 2", /*log_interval=*/1), "--train-iters");
  EXPECT_GT(g.long_run[0].kiln, g.short_run[0].kiln) << "rank 0 prints the lines";
}

}  // namespace
}  // namespace kiln
