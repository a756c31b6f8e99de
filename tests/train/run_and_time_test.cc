// scripts/run_and_time_bert.sh end to end: both phases as two kiln processes on a corpus that
// BERT-tiny memorises to the real MLPerf target, one seed, one log that the official checker
// accepts (where installed) and that holds init_start..init_stop then run_start..run_stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "kiln/core/file_util.h"
#include "tests/testing/mllog_events.h"
#include "tests/testing/mlperf_checker.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_data.h"
#include "tests/train/tiny_runs.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> keys(const fs::path& log) {
  std::vector<std::string> out;
  for (const std::string& e : testing::mllog_events(log)) out.push_back(nlohmann::json::parse(e).at("key"));
  return out;
}

std::string system_host() {
  auto [rc, name] = testing::run_command("hostname -s");
  return rc == 0 ? name.substr(0, name.find('\n')) : "host";
}

TEST(RunAndTime, BertScriptRunsBothPhasesIntoOneCompliantLog) {
  KILN_REQUIRE_TEST_DATA();
  const fs::path root = testing::unique_temp_dir("run_and_time_bert");
  const fs::path data = testing::memorable_bert_corpus(root, kiln::data::Sampling::reference);
  const fs::path out = root / "out";
  const std::string command =
      "cd '" + root.string() + "' && KILN='" + KILN_BINARY + "' SEED=4242 OUTPUT_DIR='" + out.string() +
      "' INIT_BENCHMARK=3 SUBMISSION_PLATFORM=test-box '" + KILN_SOURCE_DIR +
      "/scripts/run_and_time_bert.sh' --config '" + KILN_SOURCE_DIR + "/configs/bert-tiny.toml' --data '" +
      data.string() + "' --vocab '" + testing::test_vocab().string() +
      "' --seq-length 32 --max-predictions 5 --global-batch-size 32 --train-iters 1000 --eval-interval 50 "
      "--lr 0.02 --lr-warmup-iters 20 --disable-dropout --log-interval 100 --init-random";
  const auto [rc, output] = testing::run_command(command);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("Estimated training time"), std::string::npos) << output;

  // The console of both phases, tee'd to bert_<platform>_<MMDDHHMM>_<seed>.log.
  int consoles = 0;
  for (const auto& f : fs::directory_iterator(out)) {
    const std::string name = f.path().filename().string();
    if (name.starts_with("bert_test-box_") && name.ends_with("_4242.log")) {
      ++consoles;
      EXPECT_EQ(read_file(f.path()), output.substr(output.find('\n') + 1)) << name;
    }
  }
  EXPECT_EQ(consoles, 1);

  const fs::path log = out / "result_bert_4242.log";
  const std::vector<std::string> k = keys(log);
  const auto at = [&](const std::string& key) { return std::find(k.begin(), k.end(), key) - k.begin(); };
  for (const char* once : {"cache_clear", "init_start", "init_stop", "run_start", "run_stop", "seed",
                           "submission_platform", "global_batch_size"})
    EXPECT_EQ(std::count(k.begin(), k.end(), once), 1) << once;
  EXPECT_EQ(k.front(), "cache_clear");
  EXPECT_LT(at("init_start"), at("init_stop"));
  EXPECT_EQ(at("run_start"), at("init_stop") + 1);
  EXPECT_EQ(k.back(), "run_stop");
  EXPECT_NE(read_file(log).find("\"status\": \"success\""), std::string::npos);
  testing::expect_compliant_where_checker_installed(log, "5.0.0");

  const auto [package_rc, package] = testing::run_command(std::string(KILN_SOURCE_DIR) +
                                                          "/scripts/package_submission.sh --out '" +
                                                          (root / "package").string() + "' --benchmark bert '" +
                                                          log.string() + "'");
  EXPECT_EQ(package_rc, 0) << package;
  EXPECT_EQ(read_file(log), read_file(root / "package/results" / ("kiln-cpu-" + system_host()) / "bert/result_0.txt"));
  EXPECT_EQ(package.find("did not reach the target"), std::string::npos) << package;
  EXPECT_EQ(package.find("result_0.txt failed"), std::string::npos) << package;
}

TEST(RunAndTimeScripts, PrintTheirUsage) {
  for (const char* script : {"run_and_time_bert.sh", "run_and_time_resnet.sh"}) {
    const auto [rc, out] = testing::run_command(std::string(KILN_SOURCE_DIR) + "/scripts/" + script + " --help");
    EXPECT_EQ(rc, 0) << script;
    EXPECT_NE(out.find("usage: scripts/" + std::string(script)), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace kiln
