// The two-process MLPerf run (train/config/mlperf_phase.h): INITMLPERF / RUNMLPERF / --mlperf-phase,
// and the log the two phases write together, on BERT-tiny with fake data (seconds).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "kiln/core/file_util.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/bert.h"
#include "kiln/train/recipes/resnet.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/mllog_events.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;

// BERT-tiny on fake data; `env`: the environment applies too (as kiln train does).
BertTrainConfig fake_bert(const fs::path& run_dir, const std::vector<std::string>& extra, bool env = false) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  registry.apply_toml(fs::path(KILN_SOURCE_DIR) / "configs/bert-tiny.toml");
  if (env) registry.apply_env();
  testing::apply_flag_list(registry, testing::concat({"--fake-data", "--seq-length", "32", "--max-predictions", "5",
                                                      "--global-batch-size", "8", "--train-iters", "4",
                                                      "--eval-interval", "2", "--eval-iters", "1", "--seed", "77",
                                                      "--output-dir", run_dir.string()},
                                                     extra));
  finalize_bert_config(c, registry);
  return c;
}

BertRunResult run_bert(const BertTrainConfig& c) {
  std::ostringstream console;
  return train_bert(c, {}, console);
}

// The keys of the log's events, in order.
std::vector<std::string> keys(const fs::path& log) {
  std::vector<std::string> out;
  for (const std::string& e : testing::mllog_events(log)) out.push_back(nlohmann::json::parse(e).at("key"));
  return out;
}

int64_t index_of(const std::vector<std::string>& v, const std::string& key) {
  return std::find(v.begin(), v.end(), key) - v.begin();
}

TEST(MlperfPhase, FlagAndTinygradEnvironmentNamesSelectThePhase) {
  const fs::path dir = testing::unique_temp_dir("mlperf_phase_config");
  const BertTrainConfig init = fake_bert(dir, {"--mlperf-phase", "init"});
  EXPECT_EQ(init.mlperf.phase, MlperfPhase::init);
  EXPECT_EQ(init.benchmark, 10);  // tinygrad's BENCHMARK=10 when not given
  EXPECT_TRUE(init.fake_data);
  EXPECT_EQ(fake_bert(dir, {"--mlperf-phase", "run"}).mlperf.phase, MlperfPhase::run);
  EXPECT_EQ(fake_bert(dir, {}).mlperf.phase, MlperfPhase::both);

  ::setenv("RUNMLPERF", "1", 1);
  EXPECT_EQ(fake_bert(dir, {}, true).mlperf.phase, MlperfPhase::run);
  EXPECT_NE(testing::error_of([&] { fake_bert(dir, {"--mlperf-phase", "init"}, true); })
                .find("both the init and the run"),
            std::string::npos);
  ::unsetenv("RUNMLPERF");
  ::setenv("INITMLPERF", "1", 1);
  EXPECT_EQ(fake_bert(dir, {}, true).mlperf.phase, MlperfPhase::init);
  ::unsetenv("INITMLPERF");
  EXPECT_NE(testing::error_of([&] { fake_bert(dir, {"--mlperf-phase", "warm"}); }).find("run.mlperf_phase"),
            std::string::npos);
}

TEST(MlperfPhase, InitThenRunPhaseWriteOneLogWithOnePreamble) {
  const fs::path dir = testing::unique_temp_dir("mlperf_phase_log");
  const BertRunResult init = run_bert(fake_bert(dir, {"--mlperf-phase", "init", "--benchmark", "2"}));
  EXPECT_EQ(init.steps, 2);
  const std::vector<std::string> after_init = keys(init.log_file);
  ASSERT_FALSE(after_init.empty());
  EXPECT_EQ(after_init.front(), "cache_clear");
  EXPECT_EQ(after_init.back(), "init_stop");
  EXPECT_EQ(index_of(after_init, "global_batch_size"), int64_t(after_init.size()));  // run phase's

  const BertRunResult run = run_bert(fake_bert(dir, {"--mlperf-phase", "run"}));
  EXPECT_EQ(run.log_file, init.log_file);
  EXPECT_EQ(run.steps, 4);
  const std::vector<std::string> all = keys(run.log_file);
  ASSERT_GT(all.size(), after_init.size());
  EXPECT_TRUE(std::equal(after_init.begin(), after_init.end(), all.begin())) << "the init phase's events kept";
  EXPECT_EQ(all[after_init.size()], "run_start") << "run_start first in the run phase";
  EXPECT_EQ(all.back(), "run_stop");
  for (const char* once : {"cache_clear", "init_start", "init_stop", "submission_benchmark", "seed", "run_start",
                           "run_stop", "global_batch_size", "opt_base_learning_rate"})
    EXPECT_EQ(std::count(all.begin(), all.end(), once), 1) << once;
  EXPECT_GT(index_of(all, "global_batch_size"), index_of(all, "run_start"));
  EXPECT_GT(index_of(all, "block_start"), index_of(all, "global_batch_size"));
}

// The submitter comes from SUBMISSION_ORG (TOML run.submission_org), kiln's name without it.
TEST(MlperfPhase, TheSubmitterComesFromSubmissionOrg) {
  const fs::path plain = testing::unique_temp_dir("mlperf_phase_org_default");
  run_bert(fake_bert(plain, {"--mlperf-phase", "init", "--benchmark", "1"}, true));
  EXPECT_EQ(testing::event_value(plain / "result_bert_77.log", "submission_org"), "kiln");
  const testing::ScopedEnv org("SUBMISSION_ORG", "tinycorp");
  const fs::path dir = testing::unique_temp_dir("mlperf_phase_org");
  run_bert(fake_bert(dir, {"--mlperf-phase", "init", "--benchmark", "1"}, true));
  EXPECT_EQ(testing::event_value(dir / "result_bert_77.log", "submission_org"), "tinycorp");
  ResNetTrainConfig c;
  ConfigRegistry registry;
  register_resnet_config(registry, c);
  registry.apply_env();
  testing::apply_flag_list(registry, {"--fake-data"});
  finalize_resnet_config(c, registry);
  EXPECT_EQ(c.submission_org, "tinycorp");
}

TEST(MlperfPhase, RunPhaseNeedsAFinishedInitPhaseAndRunsOnce) {
  const fs::path dir = testing::unique_temp_dir("mlperf_phase_errors");
  const std::string missing = testing::error_of([&] { run_bert(fake_bert(dir, {"--mlperf-phase", "run"})); });
  EXPECT_NE(missing.find("result_bert_77.log: missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("init phase first"), std::string::npos) << missing;

  run_bert(fake_bert(dir, {"--mlperf-phase", "init", "--benchmark", "1"}));
  run_bert(fake_bert(dir, {"--mlperf-phase", "run"}));
  const std::string log = read_file(dir / "result_bert_77.log");
  const std::string again = testing::error_of([&] { run_bert(fake_bert(dir, {"--mlperf-phase", "run"})); });
  EXPECT_NE(again.find("already holds a run"), std::string::npos) << again;
  EXPECT_EQ(read_file(dir / "result_bert_77.log"), log) << "a refused run phase leaves the log as it was";
}

ResNetTrainConfig fake_resnet(const fs::path& run_dir, const std::vector<std::string>& extra) {
  ResNetTrainConfig c;
  ConfigRegistry registry;
  register_resnet_config(registry, c);
  testing::apply_flag_list(registry, testing::concat({"--fake-data", "--arch", "resnet18", "--width", "8",
                                                      "--small-images", "--image-size", "16", "--eval-resize", "16",
                                                      "--num-classes", "10", "--batch-size", "4", "--seed", "5",
                                                      "--output-dir", run_dir.string()},
                                                     extra));
  finalize_resnet_config(c, registry);
  return c;
}

TEST(MlperfPhase, ResNetInitThenRunPhaseShareOneLog) {
  const fs::path dir = testing::unique_temp_dir("mlperf_phase_resnet");
  const ResNetTrainConfig init = fake_resnet(dir, {"--mlperf-phase", "init", "--benchmark", "2"});
  EXPECT_EQ(init.mlperf.phase, MlperfPhase::init);
  std::ostringstream console;
  const ResNetRunResult first = train_resnet(init, {}, console);
  EXPECT_EQ(keys(first.log_file).back(), "init_stop");
  const ResNetRunResult run = train_resnet(fake_resnet(dir, {"--mlperf-phase", "run", "--exit-interval", "2"}), {},
                                           console);
  const std::vector<std::string> all = keys(run.log_file);
  const int64_t init_stop = index_of(all, "init_stop");
  ASSERT_LT(init_stop + 1, int64_t(all.size()));
  EXPECT_EQ(all[size_t(init_stop + 1)], "run_start");
  for (const char* once : {"cache_clear", "init_start", "seed", "run_start", "global_batch_size", "opt_name"})
    EXPECT_EQ(std::count(all.begin(), all.end(), once), 1) << once;
  EXPECT_GT(index_of(all, "epoch_start"), index_of(all, "lars_opt_weight_decay"));
}

}  // namespace
}  // namespace kiln::train
