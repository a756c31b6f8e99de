// cmake/gtest_suites.cmake and cmake/gtest_suite_status.sh as ctest runs them: a stand-in test
// binary answers --gtest_list_tests and each --gtest_filter with GoogleTest's own summary lines,
// and ctest must call a suite with a skipped test "Skipped" and one with a failure "Failed",
// whatever else the suite printed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// What ctest said of `test` ("Passed", "Skipped", "Failed", ...) in `output`.
std::string verdict(const std::string& output, const std::string& test) {
  std::smatch m;
  const std::regex line("Test +#[0-9]+: " + test + " \\.+[ *]*([A-Za-z]+)");
  return std::regex_search(output, m, line) ? m[1].str() : "(not run)";
}

TEST(CtestSuites, ASuiteWithASkipIsSkippedAndOneWithAFailureFailed) {
  const fs::path dir = testing::unique_temp_dir("ctest_suites");
  const fs::path binary = dir / "fake_tests.sh";
  // The summary lines GoogleTest prints for each outcome.
  std::ofstream(binary) << R"(#!/bin/sh
case "$1" in
  --gtest_list_tests) printf 'Passing.\n  A\nSkipAndPass.\n  A\n  B\nSkipAndFail.\n  A\n  B\nAllFail.\n  A\nAllSkip.\n  A\n' ;;
  --gtest_filter=Passing.*) printf '[       OK ] Passing.A (0 ms)\n[  PASSED  ] 1 test.\n' ;;
  --gtest_filter=SkipAndPass.*)
    printf '[  SKIPPED ] SkipAndPass.A (0 ms)\n[  PASSED  ] 1 test.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] SkipAndPass.A\n' ;;
  --gtest_filter=SkipAndFail.*)
    printf '[  PASSED  ] 0 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] SkipAndFail.A\n'
    printf '[  FAILED  ] 1 test, listed below:\n[  FAILED  ] SkipAndFail.B\n'; exit 1 ;;
  --gtest_filter=AllFail.*) printf '[  PASSED  ] 0 tests.\n[  FAILED  ] 1 test, listed below:\n'; exit 1 ;;
  --gtest_filter=AllSkip.*) printf '[  PASSED  ] 0 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] AllSkip.A\n' ;;
esac
)";
  fs::permissions(binary, fs::perms::owner_all, fs::perm_options::add);
  const std::string source = KILN_SOURCE_DIR;
  std::ofstream(dir / "suites.cmake") << "set(KILN_TEST_BINARY \"" << binary.string() << "\")\n"
                                      << "set(KILN_SUITE_STATUS \"" << source << "/cmake/gtest_suite_status.sh\")\n"
                                      << "set(KILN_SUITE_FILTER \"*\")\nset(KILN_SUITE_LABEL unit)\n"
                                      << "include(\"" << source << "/cmake/gtest_suites.cmake\")\n";
  std::ofstream(dir / "CMakeLists.txt")
      << "cmake_minimum_required(VERSION 3.20)\nproject(suites NONE)\nenable_testing()\n"
      << "set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES \"" << (dir / "suites.cmake").string() << "\")\n";
  const auto [configured, configure_out] =
      testing::run_command("cmake -S '" + dir.string() + "' -B '" + (dir / "b").string() + "'");
  ASSERT_EQ(configured, 0) << configure_out;
  const auto [rc, out] = testing::run_command("ctest --test-dir '" + (dir / "b").string() + "'");
  EXPECT_NE(rc, 0) << out;  // two suites failed
  EXPECT_EQ(verdict(out, "Passing"), "Passed") << out;
  EXPECT_EQ(verdict(out, "SkipAndPass"), "Skipped") << out;
  EXPECT_EQ(verdict(out, "AllSkip"), "Skipped") << out;
  EXPECT_EQ(verdict(out, "SkipAndFail"), "Failed") << out;
  EXPECT_EQ(verdict(out, "AllFail"), "Failed") << out;
}

}  // namespace
}  // namespace kiln
