// tests/testing/mlperf_checker.h — runs the official MLPerf compliance checker (the
// mlperf_logging package of mlcommons/logging) on a log. The package is found at
// $KILN_MLPERF_LOGGING (a checkout of mlcommons/logging: the folder holding setup.py) or
// installed (`pip install git+https://github.com/mlcommons/logging`).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
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

// In a test: the official checker must accept `log` where it is installed; elsewhere says once
// that the log was not checked (the test's other checks still run).
inline void expect_compliant_where_checker_installed(const std::filesystem::path& log, const std::string& ruleset) {
  if (!mlperf_logging_path()) {
    static bool said = false;
    if (!said) std::cout << "the official MLPerf checker is not installed: MLPerf logs are not checked\n";
    said = true;
    return;
  }
  const CheckerResult check = run_compliance_checker(log, ruleset);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace kiln::testing

// In a test body: skips (saying why) when the official checker is not installed anywhere.
#define KILN_REQUIRE_MLPERF_CHECKER()                                                           \
  do {                                                                                          \
    if (!::kiln::testing::mlperf_logging_path())                                                \
      GTEST_SKIP() << "the official mlperf_logging package is not installed (pip install "      \
                      "git+https://github.com/mlcommons/logging or set KILN_MLPERF_LOGGING)";   \
  } while (0)
