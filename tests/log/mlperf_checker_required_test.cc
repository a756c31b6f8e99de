// tests/testing/mlperf_checker.h where the official checker cannot be found (this test binary
// run again with a python3 that imports nothing and KILN_MLPERF_LOGGING naming an empty folder):
// the tests that want it are skipped, saying why, and fail with KILN_REQUIRE_MLPERF_CHECKER=1
// (as CI sets it, .ci/run).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// This binary, running only `filter`, with no checker anywhere; `require` sets
// KILN_REQUIRE_MLPERF_CHECKER=1.
std::pair<int, std::string> run_without_checker(const std::string& filter, bool require) {
  const fs::path dir = testing::unique_temp_dir("no_checker");
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "empty");
  std::ofstream(dir / "bin/python3") << "#!/bin/sh\nexit 1\n";
  fs::permissions(dir / "bin/python3", fs::perms::owner_all, fs::perm_options::add);
  return testing::run_command("PATH='" + (dir / "bin").string() + "':\"$PATH\" KILN_MLPERF_LOGGING='" +
                              (dir / "empty").string() + "' KILN_REQUIRE_MLPERF_CHECKER=" + (require ? "1" : "0") +
                              " '" + fs::read_symlink("/proc/self/exe").string() + "' --gtest_filter=" + filter);
}

const char* const kWants[] = {
    "MllogCheck.CompliantBertLogPasses",  // KILN_REQUIRE_MLPERF_CHECKER() in SetUp
    "PackageSubmission.TwoRunsGoIntoTheSubmissionLayoutWithASystemDescription",  // skip_or_fail_without_checker
};

TEST(MlperfCheckerRequired, WithoutTheCheckerTestsThatWantItAreSkippedSayingWhy) {
  for (const char* test : kWants) {
    const auto [rc, out] = run_without_checker(test, false);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("[  SKIPPED ] " + std::string(test)), std::string::npos) << out;
    EXPECT_NE(out.find("holds no mlperf_logging/compliance_checker"), std::string::npos) << out;
  }
}

TEST(MlperfCheckerRequired, WithoutTheCheckerTestsThatWantItFailWhereItIsRequired) {
  for (const char* test : kWants) {
    const auto [rc, out] = run_without_checker(test, true);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("[  FAILED  ] " + std::string(test)), std::string::npos) << out;
    EXPECT_NE(out.find("(KILN_REQUIRE_MLPERF_CHECKER=1)"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace kiln
