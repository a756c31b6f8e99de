// Writes MLPerf BERT logs with MlLogger and runs the official MLPerf compliance checker
// (mlperf_logging, tests/testing/mlperf_checker.h) on them: the compliant sequence must pass,
// and each kind of broken log must fail naming what is wrong.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/log/bert_mllog.h"
#include "kiln/log/mllog.h"
#include "kiln/log/mllog_keys.h"
#include "tests/testing/mlperf_checker.h"

namespace kiln::log {
namespace {

namespace fs = std::filesystem;

fs::path temp_log(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_mllog_check_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p;
}

using CheckResult = testing::CheckerResult;

CheckResult run_checker(const fs::path& log) { return testing::run_compliance_checker(log, "5.0.0"); }

BertRunInfo nvidia_like_run() {
  BertRunInfo info;
  info.seed = 1234;
  info.global_batch_size = 768;
  info.opt_base_learning_rate = 0.00096;
  info.opt_lamb_beta_1 = 0.60466;
  info.opt_lamb_beta_2 = 0.85437;
  info.opt_lamb_weight_decay_rate = 0.1;
  info.opt_learning_rate_training_steps = 3680;
  info.train_samples = 768 * 3680;
  info.submission.org = "kiln";
  info.submission.platform = "1xH200";
  return info;
}

// The whole run: preamble, one block with evals every 150,528 samples (196 steps of 768), run_stop.
void write_bert_log(const fs::path& p, std::vector<double> accuracies, bool success) {
  MlLogger ml(p, false);
  log_bert_preamble(ml, nvidia_like_run());
  const int64_t interval = 196 * 768;
  log_bert_block_start(ml, 0, interval * int64_t(accuracies.size()));
  for (size_t i = 0; i < accuracies.size(); ++i) {
    const int64_t seen = interval * int64_t(i + 1);
    log_bert_eval_start(ml, seen);
    log_bert_eval_stop(ml, seen, accuracies[i]);
  }
  log_bert_block_stop(ml, 0);
  log_run_stop(ml, success);
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

bool has_key(const std::string& line, std::string_view k) {
  return line.find("\"key\": \"" + std::string(k) + "\"") != std::string::npos;
}

// Rewrites the record of every line with key `k` through `edit`.
std::vector<std::string> edit_key(std::vector<std::string> lines, std::string_view k, auto edit) {
  for (auto& l : lines) {
    if (!has_key(l, k)) continue;
    Json j = Json::parse(l.substr(l.find('{')));
    edit(j);
    l = ":::MLLOG " + mllog_json(j);
  }
  return lines;
}

std::vector<std::string> drop_key(std::vector<std::string> lines, std::string_view k) {
  std::erase_if(lines, [&](const std::string& l) { return has_key(l, k); });
  return lines;
}

class MllogCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_REQUIRE_MLPERF_CHECKER();
    good_ = temp_log("result_bert_1234.log");
    write_bert_log(good_, {0.69, 0.715, 0.7205}, true);
    lines_ = read_lines(good_);
  }
  // Writes `lines` as a log and expects the checker to fail mentioning `expect`.
  void expect_failure(const std::string& name, const std::vector<std::string>& lines, const std::string& expect) {
    const fs::path p = temp_log(name);
    write_lines(p, lines);
    const CheckResult r = run_checker(p);
    EXPECT_EQ(r.exit_code, 1) << name << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << name << ": wanted '" << expect << "' in\n" << r.output;
    EXPECT_EQ(r.output.find("SUCCESS"), std::string::npos) << name;
  }
  fs::path good_;
  std::vector<std::string> lines_;
};

TEST_F(MllogCheck, CompliantBertLogPasses) {
  const CheckResult r = run_checker(good_);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SUCCESS"), std::string::npos) << r.output;
  // Order: cache_clear, init_start, submission_*, seed, hyper-parameters, init_stop, run_start, ...
  ASSERT_GE(lines_.size(), 30u);
  EXPECT_TRUE(has_key(lines_[0], key::kCacheClear));
  EXPECT_TRUE(has_key(lines_[1], key::kInitStart));
  EXPECT_TRUE(has_key(lines_[2], key::kSubmissionBenchmark));
  EXPECT_TRUE(has_key(lines_.back(), key::kRunStop));
  EXPECT_NE(lines_[7].find(R"("key": "seed", "value": 1234, "metadata": {"file": "kiln/log/bert_mllog.cc")"),
            std::string::npos) << lines_[7];
}

TEST_F(MllogCheck, MissingRunStopFails) {
  expect_failure("no_run_stop.log", drop_key(lines_, key::kRunStop), "run_stop");
}

TEST_F(MllogCheck, MissingOptKeyFails) {
  expect_failure("no_eps.log", drop_key(lines_, key::kOptLambEpsilon), "opt_lamb_epsilon");
  expect_failure("no_gas.log", drop_key(lines_, key::kGradientAccumulationSteps), "gradient_accumulation_steps");
}

TEST_F(MllogCheck, EvalBelowTargetWithSuccessFails) {
  const fs::path p = temp_log("below_target.log");
  write_bert_log(p, {0.69, 0.7199}, true);
  const CheckResult r = run_checker(p);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("Failed checks for eval_accuracy"), std::string::npos) << r.output;
  // An accuracy of 1.0 or more does not count as reaching the target either.
  const fs::path q = temp_log("accuracy_one.log");
  write_bert_log(q, {0.69, 1.0}, true);
  EXPECT_EQ(run_checker(q).exit_code, 1);
}

TEST_F(MllogCheck, AbortedRunBelowTargetStillFailsOnAccuracy) {
  const fs::path p = temp_log("aborted.log");
  write_bert_log(p, {0.69}, false);
  const CheckResult r = run_checker(p);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("status success"), std::string::npos) << r.output;
}

// A second run appended to the same file (what a re-run into the same output folder did).
TEST_F(MllogCheck, SecondRunAppendedToTheLogFails) {
  std::vector<std::string> twice = lines_;
  for (const auto& l : lines_) {
    Json j = Json::parse(l.substr(l.find('{')));
    j["time_ms"] = j["time_ms"].get<int64_t>() + 100000;
    twice.push_back(":::MLLOG " + mllog_json(j));
  }
  expect_failure("twice.log", twice, "EXACTLY_ONE occurrence of 'run_start' but found 2");
}

TEST_F(MllogCheck, InitLongerThanThirtyMinutesFails) {
  double init_start_ms = 0;
  auto lines = edit_key(lines_, key::kInitStart, [&](Json& j) { init_start_ms = j["time_ms"].get<double>(); });
  // Shift init_stop and everything after it 31 minutes later.
  bool after = false;
  for (auto& l : lines) {
    after = after || has_key(l, key::kInitStop);
    if (!after) continue;
    Json j = Json::parse(l.substr(l.find('{')));
    j["time_ms"] = j["time_ms"].get<int64_t>() + 31 * 60 * 1000;
    l = ":::MLLOG " + mllog_json(j);
  }
  expect_failure("slow_init.log", lines, "CHECK for 'init_stop' failed");
}

TEST_F(MllogCheck, DivisionLoggedAfterInitStopFails) {
  std::vector<std::string> lines = drop_key(lines_, key::kSubmissionDivision);
  const std::string division = *std::find_if(lines_.begin(), lines_.end(),
                                             [](auto& l) { return has_key(l, key::kSubmissionDivision); });
  const auto stop = std::find_if(lines.begin(), lines.end(), [](auto& l) { return has_key(l, key::kInitStop); });
  lines.insert(stop + 1, division);
  expect_failure("late_division.log", lines, "init_stop");
}

// (The official checker accepts a float seed, an unknown submission_status and time going
// backwards; kiln's writer refuses the first two itself, see InvalidRunInfoIsRejected...)
TEST_F(MllogCheck, MalformedValuesFail) {
  expect_failure("zero_gas.log",
                 edit_key(lines_, key::kGradientAccumulationSteps, [](Json& j) { j["value"] = 0; }),
                 "CHECK for 'gradient_accumulation_steps' failed");
  expect_failure("samples_only.log", edit_key(lines_, key::kEvalAccuracy, [](Json& j) {
                   j["metadata"].erase("epoch_num");
                   j["metadata"]["samples_count"] = 150528;
                 }),
                 "CHECK for 'eval_accuracy' failed");
  std::vector<std::string> garbage = lines_;
  garbage.insert(garbage.begin() + 3, "[rank0]: :::MLLOG {\"key\": \"seed\"");
  expect_failure("garbage.log", garbage, "Log lines had parsing errors");
}

TEST_F(MllogCheck, PrefixedLinesAndOtherOutputAreIgnored) {
  std::vector<std::string> lines;
  for (const auto& l : lines_) {
    lines.push_back("step 1 loss 9.0");
    lines.push_back("[rank0]: " + l);
  }
  const fs::path p = temp_log("prefixed.log");
  write_lines(p, lines);
  EXPECT_EQ(run_checker(p).exit_code, 0) << run_checker(p).output;
}

TEST(BertMllog, InvalidRunInfoIsRejectedBeforeAnythingIsLogged) {
  BertRunInfo info = nvidia_like_run();
  info.submission.status = "home";
  const fs::path p = temp_log("invalid.log");
  MlLogger ml(p, false);
  EXPECT_THROW(log_bert_preamble(ml, info), Error);
  EXPECT_TRUE(read_lines(p).empty());
}

}  // namespace
}  // namespace kiln::log
