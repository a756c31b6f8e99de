// tests/testing/mlperf_checker.h — runs the official MLPerf compliance checker (the
// mlperf_logging package of mlcommons/logging) on a log. The package is found at
// $KILN_MLPERF_LOGGING (a checkout of mlcommons/logging: the folder holding setup.py) or
// installed (`pip install git+https://github.com/mlcommons/logging`). Where it is nowhere, a
// test that wants it is skipped, saying so; with KILN_REQUIRE_MLPERF_CHECKER=1 (CI: .ci/run)
// it fails instead.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "tests/testing/run_command.h"

namespace kiln::testing {

// PYTHONPATH to reach mlperf_logging ("" when it is installed); nullopt when it is nowhere.
inline std::optional<std::string> mlperf_logging_path() {
  namespace fs = std::filesystem;
  static const std::optional<std::string> found = []() -> std::optional<std::string> {
    const char* env = std::getenv("KILN_MLPERF_LOGGING");
    if (env && fs::is_directory(fs::path(env) / "mlperf_logging" / "compliance_checker"))
      return fs::canonical(env).string();
    if (run_command("python3 -c 'import mlperf_logging.compliance_checker'").first == 0) return "";
    return std::nullopt;
  }();
  return found;
}

// KILN_REQUIRE_MLPERF_CHECKER=1: a missing checker fails the tests that want it.
inline bool mlperf_checker_required() {
  const char* env = std::getenv("KILN_REQUIRE_MLPERF_CHECKER");
  return env && std::string(env) == "1";
}

// Why the checker is not there, for a skip or a failure.
inline std::string mlperf_checker_missing() {
  const char* env = std::getenv("KILN_MLPERF_LOGGING");
  return env ? "KILN_MLPERF_LOGGING=" + std::string(env) + " holds no mlperf_logging/compliance_checker"
             : "the official mlperf_logging package is not installed (pip install "
               "git+https://github.com/mlcommons/logging or set KILN_MLPERF_LOGGING)";
}

struct CheckerResult {
  int exit_code = -1;  // 0: SUCCESS
  std::string output;
};

// `python3 -m mlperf_logging.compliance_checker --ruleset RULESET LOG`, run in a scratch folder
// (the checker writes compliance_checker.log into its working directory).
inline CheckerResult run_compliance_checker(const std::filesystem::path& log, const std::string& ruleset) {
  const auto path = mlperf_logging_path();
  if (!path) return {-1, "mlperf_logging not found"};
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_checker_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string env = path->empty() ? "" : "PYTHONPATH='" + *path + "' ";
  auto [rc, out] = run_command("cd '" + dir.string() + "' && " + env +
                               "python3 -m mlperf_logging.compliance_checker --ruleset " + ruleset + " '" +
                               log.string() + "'");
  return {rc, out};
}

// In a test that found no checker: skips, saying what went unchecked (the test's other checks
// still count: a failure among them still fails it); fails instead with
// KILN_REQUIRE_MLPERF_CHECKER=1.
inline void skip_or_fail_without_checker(const std::string& unchecked) {
  if (mlperf_checker_required()) {
    ADD_FAILURE() << mlperf_checker_missing() << " (KILN_REQUIRE_MLPERF_CHECKER=1): " << unchecked << " not checked";
  } else {
    GTEST_SKIP() << mlperf_checker_missing() << ": " << unchecked << " not checked";
  }
}

// In a test: the official checker must accept `log`; without one, skip_or_fail_without_checker.
inline void expect_compliant_where_checker_installed(const std::filesystem::path& log, const std::string& ruleset) {
  if (!mlperf_logging_path()) return skip_or_fail_without_checker(log.string());
  const CheckerResult check = run_compliance_checker(log, ruleset);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace kiln::testing

// In a test body or SetUp: skips (saying why) when the official checker is not installed
// anywhere; fails instead with KILN_REQUIRE_MLPERF_CHECKER=1.
#define KILN_REQUIRE_MLPERF_CHECKER()                                                   \
  do {                                                                                  \
    if (!::kiln::testing::mlperf_logging_path()) {                                      \
      if (::kiln::testing::mlperf_checker_required())                                   \
        GTEST_FAIL() << ::kiln::testing::mlperf_checker_missing()                       \
                     << " (KILN_REQUIRE_MLPERF_CHECKER=1)";                             \
      GTEST_SKIP() << ::kiln::testing::mlperf_checker_missing();                        \
    }                                                                                   \
  } while (0)
