// End-to-end Megatron path: JSON lines -> `kiln prepare indexed` (.bin/.idx) -> `kiln train bert
// --data-path ...` with the pre-LN model, AdamW, SOP, TensorBoard and Megatron checkpoints.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/core/file_util.h"
#include "kiln/train/recipes/bert.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"
#include "tests/train/bert_baselines.h"
#include "tests/train/megatron_test_util.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;

using testing::megatron_tiny;
using testing::prepare_indexed;
using testing::sotu_jsonl;

fs::path fresh(const std::string& name) {
  return testing::unique_temp_dir("megatron_" + name);
}

// Learning, not luck: the masked-LM accuracy must beat always predicting the most frequent
// masked token of the same (second) eval set, measured here; a model that learned only token
// frequencies cannot. At lr 0.002 and 300 steps this pre-LN + Adam run stalled at exactly that
// baseline (0.0753; see the learning-rate note on the SOP test below); at lr 0.001 it needs about
// 400 steps to pass it and a slow decay to keep going (on the first eval set, baseline 0.083:
// 0.076, 0.100, 0.120 at steps 200, 400, 600 decaying over 1000 steps), so the run decays over
// 2000 steps and stops at 600. The margin: 2 points above the baseline.
TEST(MegatronBert, LmAccuracyRisesAboveTheMostFrequentTokenAndTensorBoardReadsBack) {
  KILN_REQUIRE_TEST_DATA();
  const fs::path dir = fresh("sotu");
  const std::string data = prepare_indexed(sotu_jsonl(dir), dir / "sotu");
  const BertTrainConfig c =
      megatron_tiny(data, dir / "run", {"--seq-length", "64", "--global-batch-size", "32", "--lr", "0.001",
                                        "--train-iters", "600", "--lr-decay-iters", "2000", "--eval-interval", "600",
                                        "--eval-iters", "8",
                                        "--eval-at-start", "--tensorboard-dir", (dir / "tb").string()});
  EXPECT_EQ(c.padded_vocab_size(), 30592);  // 30522 padded to a multiple of 128
  const testing::EvalBaselines base = testing::eval_baselines(c, 1);  // Megatron's evals differ
  std::ostringstream console;
  const BertRunResult r = train_bert(c, {}, console);
  ASSERT_EQ(r.evals.size(), 2u) << console.str();
  const double after = r.evals.back().mlm_accuracy;
  const std::string report = fmt::format(
      "masked-LM accuracy {:.4f} -> {:.4f}; most frequent masked token ({}) scores {:.4f} over {} tokens; "
      "SOP accuracy {:.4f}, majority label {:.4f}",
      r.evals.front().mlm_accuracy, after, base.most_frequent_token, base.mlm_most_frequent, base.masked_tokens,
      r.evals.back().nsp_accuracy, base.nsp_majority);
  std::cout << report << "\n";
  ASSERT_GT(base.masked_tokens, 2000) << report;
  EXPECT_LT(r.evals.front().mlm_accuracy, 0.01) << report << "\n" << console.str();
  EXPECT_GT(after, base.mlm_most_frequent + 0.02) << report << "\n" << console.str();
  EXPECT_NE(console.str().find("validation loss at iteration 600 | lm loss value:"), std::string::npos);
  EXPECT_NE(console.str().find("| consumed samples:        19200 |"), std::string::npos) << console.str();

  // The independent reader verifies every CRC and prints "tag step value" lines.
  const fs::path listing = dir / "tb.txt";
  const std::string command = "python3 " + std::string(KILN_SOURCE_DIR) + "/tools/tb_read.py " +
                              (dir / "tb").string() + "/events.out.tfevents.* > " + listing.string();
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string scalars = read_file(listing);
  EXPECT_NE(scalars.find("lm loss 600 "), std::string::npos);
  EXPECT_NE(scalars.find("sop loss 1 "), std::string::npos);
  EXPECT_NE(scalars.find("learning-rate 600 "), std::string::npos);
  EXPECT_NE(scalars.find("lm loss validation 600 "), std::string::npos);
}

// Eight sentences in the same order in every document: the order is learnable, so the SOP head
// must beat always predicting the majority label (about half of the eval set, measured here on
// the same eval set) by far within a few hundred steps.
// The learning rate: at 0.003 pre-LN bert-tiny with Adam sits at the edge of stability here. The
// masked-LM loss stalls near 3.15 by step 40 for every seed tried, and SOP ends anywhere from
// chance (0.49, the default seed since init became keyed by parameter name) to 0.98 (seeds 1, 2,
// 3, 7: 0.95, 0.87, 0.98, 0.91). At 0.001 seeds 1, 2 and the default all reach SOP >= 0.98 and
// masked-LM accuracy >= 0.39. Three LAMB steps of the same pre-LN model match PyTorch
// (BertGolden.PreLnThreeLambStepsMatchPyTorch), so the stall was the step size, not the engine.
TEST(MegatronBert, SopAccuracyRisesOnAnOrderedCorpus) {
  const fs::path dir = fresh("sop");
  {
    std::ofstream out(dir / "ordered.jsonl");
    for (int d = 0; d < 300; ++d)
      out << nlohmann::json{{"text",
                             "The quick brown fox jumps over the lazy dog. A journey of a thousand miles "
                             "begins with a single step. All that glitters is not gold. The early bird "
                             "catches the worm. Actions speak louder than words. Knowledge is power and "
                             "power corrupts. Time and tide wait for no man. The pen is mightier than the "
                             "sword."}}.dump()
          << "\n";
  }
  const std::string data = prepare_indexed(dir / "ordered.jsonl", dir / "ordered");
  const BertTrainConfig c =
      megatron_tiny(data, dir / "run", {"--seq-length", "32", "--global-batch-size", "32", "--lr", "0.001",
                                        "--train-iters", "300", "--eval-interval", "300", "--eval-iters", "4",
                                        "--eval-at-start", "--disable-dropout"});
  const testing::EvalBaselines base = testing::eval_baselines(c, 1);
  std::ostringstream console;
  const BertRunResult r = train_bert(c, {}, console);
  ASSERT_EQ(r.evals.size(), 2u) << console.str();
  const EvalResult& after = r.evals.back();
  const std::string report = fmt::format(
      "SOP accuracy {:.4f} -> {:.4f}, majority label {:.4f} over {} samples; masked-LM accuracy {:.4f} -> "
      "{:.4f}, most frequent masked token ({}) {:.4f}",
      r.evals.front().nsp_accuracy, after.nsp_accuracy, base.nsp_majority, base.labelled_rows,
      r.evals.front().mlm_accuracy, after.mlm_accuracy, base.most_frequent_token, base.mlm_most_frequent);
  std::cout << report << "\n";
  ASSERT_EQ(base.labelled_rows, 128) << report;
  EXPECT_LT(r.evals.front().nsp_accuracy, 0.7) << report << "\n" << console.str();
  // The margin: SOP 20 points above the majority label.
  EXPECT_GT(after.nsp_accuracy, base.nsp_majority + 0.20) << report << "\n" << console.str();
}

TEST(MegatronBert, ResumeFromMegatronCheckpointContinuesTheDataStream) {
  KILN_REQUIRE_TEST_DATA();
  const fs::path dir = fresh("resume");
  const std::string data = prepare_indexed(sotu_jsonl(dir), dir / "sotu");
  const std::vector<std::string> common = {"--seq-length", "32", "--global-batch-size", "8",
                                           "--train-iters", "8", "--eval-interval", "100",
                                           "--eval-iters", "1", "--save-interval", "4"};
  auto with = [&](const std::vector<std::string>& extra) { return testing::concat(common, extra); };
  std::ostringstream console;
  const BertRunResult full = train_bert(megatron_tiny(data, dir / "full", with({})), {}, console);
  const fs::path ckpt = dir / "ckpt";
  const BertRunResult first = train_bert(
      megatron_tiny(data, dir / "split", with({"--save", ckpt.string(), "--exit-interval", "4"})), {}, console);
  EXPECT_EQ(read_file(ckpt / "latest_checkpointed_iteration.txt"), "4\n");
  EXPECT_TRUE(fs::is_directory(ckpt / "iter_0000004"));
  const BertRunResult second = train_bert(
      megatron_tiny(data, dir / "split", with({"--load", ckpt.string()})), {}, console);
  ASSERT_EQ(full.losses.size(), 8u);
  ASSERT_EQ(second.losses.size(), 4u) << console.str();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(first.losses[i], full.losses[i]) << "step " << i + 1;
    EXPECT_EQ(second.losses[i], full.losses[4 + i]) << "step " << 5 + i;
  }
}

}  // namespace
}  // namespace kiln::train
