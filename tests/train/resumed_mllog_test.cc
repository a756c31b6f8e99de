// The MLPerf log of a run stopped and resumed into the same output folder: one file, one
// preamble, the block (BERT) or epoch (ResNet) open at the checkpoint continued, what the stopped
// run wrote after its checkpoint dropped. The official checker accepts it, and its events are
// those of an uninterrupted run. A fresh run replaces an old log; a resume that cannot continue
// its run's log is refused naming the checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/bert.h"
#include "kiln/train/recipes/resnet.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/mllog_events.h"
#include "tests/testing/mlperf_checker.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/tiny_runs.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using testing::with_flags;
using testing::mllog_events;
using testing::count_key;

// What a killed run leaves after its checkpoint: more lines, the last one cut short.
void append_lines_of_a_killed_run(const fs::path& log) {
  std::ofstream(log, std::ios::app)
      << ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"INTERVAL_START\", \"key\": "
         "\"block_start\", \"value\": null, \"metadata\": {\"first_epoch_num\": 999, \"epoch_count\": 1}}\n"
         ":::MLLOG {\"namespace\": \"\", \"time_ms\": 2, \"event_type\": \"INTERV";
}

const testing::TinyBert& bert_data() {
  static const testing::TinyBert data = testing::tiny_bert(testing::unique_temp_dir("mllog_resume_bert_data"));
  return data;
}

BertRunResult bert(const fs::path& run, const std::vector<std::string>& extra, std::ostream& console) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  testing::apply_flag_list(registry, with_flags(with_flags(bert_data().flags, {"--output-dir", run.string(), "--save",
                                                                               (run / "ckpt").string(), "--load",
                                                                               (run / "ckpt").string()}),
                                                extra));
  finalize_bert_config(c, registry);
  return train_bert(c, registry.resolved(), console);
}

// Stopped at step 22, inside the block of steps 21-25 (an evaluation every 5 steps).
TEST(ResumedMlLog, BertLogContinuesTheOpenBlockAndPassesTheOfficialChecker) {
  const fs::path dir = testing::unique_temp_dir("mllog_resume_bert");
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  const BertRunResult full = bert(dir / "full", {}, console);
  ASSERT_TRUE(full.reached_target) << console.str();
  ASSERT_GT(full.steps, 25);
  const BertRunResult first = bert(dir / "split", {"--exit-interval", "22", "--save-interval", "4"}, console);
  ASSERT_EQ(first.steps, 22);
  append_lines_of_a_killed_run(first.log_file);
  const BertRunResult second = bert(dir / "split", {"--save-interval", "4"}, console);
  ASSERT_TRUE(second.reached_target) << console.str();
  EXPECT_EQ(second.log_file, first.log_file);
  EXPECT_EQ(second.steps, full.steps);

  const std::vector<std::string> resumed = mllog_events(second.log_file);
  EXPECT_EQ(resumed, mllog_events(full.log_file));
  for (const char* key : {"cache_clear", "init_start", "init_stop", "run_start", "submission_org", "seed", "run_stop"})
    EXPECT_EQ(count_key(resumed, key), 1) << key;
  testing::expect_compliant_where_checker_installed(second.log_file, "5.0.0");
}

TEST(ResumedMlLog, ResNetLogContinuesTheOpenEpochAndPassesTheOfficialChecker) {
  const fs::path dir = testing::unique_temp_dir("mllog_resume_resnet");
  const testing::TinyResNet data = testing::tiny_resnet(dir / "images");
  auto resnet = [&](const fs::path& run, const std::vector<std::string>& extra) {
    ResNetTrainConfig c;
    ConfigRegistry registry;
    register_resnet_config(registry, c);
    testing::apply_flag_list(registry, with_flags(with_flags(data.flags, {"--output-dir", run.string(), "--save",
                                                                          (run / "ckpt").string(), "--load",
                                                                          (run / "ckpt").string()}),
                                                  extra));
    finalize_resnet_config(c, registry);
    std::ostringstream console;
  const testing::ThreadsRestored threads;
    const ResNetRunResult r = train_resnet(c, registry.resolved(), console);
    EXPECT_TRUE(r.reached_target || r.steps == c.exit_interval) << console.str();
    return r;
  };
  ASSERT_EQ(data.steps_per_epoch, 4);
  const ResNetRunResult full = resnet(dir / "full", {});
  ASSERT_TRUE(full.reached_target);
  const ResNetRunResult first = resnet(dir / "split", {"--exit-interval", "10"});  // inside epoch 3
  ASSERT_EQ(first.steps, 10);
  append_lines_of_a_killed_run(first.log_file);
  const ResNetRunResult second = resnet(dir / "split", {});
  ASSERT_TRUE(second.reached_target);
  EXPECT_EQ(second.steps, full.steps);
  const std::vector<std::string> resumed = mllog_events(second.log_file);
  EXPECT_EQ(resumed, mllog_events(full.log_file));
  EXPECT_EQ(count_key(resumed, "run_start"), 1);
  EXPECT_EQ(count_key(resumed, "epoch_start"), count_key(resumed, "epoch_stop"));
  testing::expect_compliant_where_checker_installed(second.log_file, "4.0.0");
}

TEST(ResumedMlLog, AFreshRunReplacesTheLogOfAnEarlierRun) {
  const fs::path dir = testing::unique_temp_dir("mllog_fresh");
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  const std::vector<std::string> short_run = {"--train-iters", "3", "--save", "", "--load", ""};
  const BertRunResult a = bert(dir, short_run, console);
  const BertRunResult b = bert(dir, short_run, console);
  ASSERT_EQ(a.log_file, b.log_file);
  const std::vector<std::string> lines = mllog_events(b.log_file);
  EXPECT_EQ(count_key(lines, "run_start"), 1);
  EXPECT_EQ(count_key(lines, "cache_clear"), 1);
}

TEST(ResumedMlLog, AResumeThatCannotContinueItsRunsLogIsRefusedNamingTheCheckpoint) {
  const fs::path dir = testing::unique_temp_dir("mllog_other");
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  const BertRunResult first = bert(dir / "run", {"--exit-interval", "3"}, console);
  const fs::path ckpt = dir / "run" / "ckpt";
  const std::vector<std::string> elsewhere = {"--output-dir", (dir / "elsewhere").string(), "--save", ckpt.string(),
                                              "--load", ckpt.string()};
  const std::string missing = testing::error_of([&] { bert(dir / "run", elsewhere, console); });
  EXPECT_EQ(missing.rfind("checkpoint " + (ckpt / "iter_0000003").string() + ": cannot continue its run's MLPerf log: "
                          "mllog file " + (dir / "elsewhere" / "result_bert_7.log").string() + ": cannot open",
                          0),
            0u)
      << missing;
  std::string text = read_file(first.log_file);
  text[text.find("\"seed\", \"value\": 7") + 17] = '8';  // the seed line of another run
  std::ofstream(first.log_file, std::ios::trunc) << text;
  const std::string different = testing::error_of([&] { bert(dir / "run", {}, console); });
  EXPECT_NE(different.find("bytes are not the log to continue"), std::string::npos) << different;
  EXPECT_EQ(read_file(first.log_file), text);  // refused before any change
}

TEST(ResumedMlLog, ResumingARunThatReachedItsTargetTrainsNothingAndKeepsItsEvents) {
  const fs::path dir = testing::unique_temp_dir("mllog_done");
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  const BertRunResult done = bert(dir, {}, console);
  ASSERT_TRUE(done.reached_target);
  const std::vector<std::string> log = mllog_events(done.log_file);
  std::ostringstream again;
  const BertRunResult resumed = bert(dir, {}, again);
  EXPECT_TRUE(resumed.reached_target);
  EXPECT_TRUE(resumed.losses.empty());
  EXPECT_EQ(resumed.steps, done.steps);
  EXPECT_NE(again.str().find("the run reached its target at step " + std::to_string(done.steps)), std::string::npos)
      << again.str();
  EXPECT_EQ(mllog_events(done.log_file), log);
}

}  // namespace
}  // namespace kiln::train
