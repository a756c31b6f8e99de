// tests/testing/dry_run_check.h — runs `COMMAND --dry-run` and `COMMAND RUN_FLAGS`, and checks
// that the dry run's "tensors peak per rank" estimate is within 3% of the peak the run's console
// reports ("tensors X GiB (peak Y)", the first match of `peak_pattern`).
#pragma once
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/testing/run_command.h"

namespace kiln::testing {

inline constexpr const char* kConsolePeak = R"(tensors [0-9.]+ GiB \(peak ([0-9.]+)\))";

// The number `pattern`'s group 1 captures in `output`, -1 when nothing matches.
inline double gib_after(const std::string& output, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

// The measured peak, after checking it against the estimate (both above `at_least` GiB, so that
// the console's two decimals leave the ratio meaningful).
inline double expect_dry_run_estimate(const std::string& command, const std::string& run_flags,
                                      const std::string& peak_pattern = kConsolePeak, double at_least = 0.3) {
  const auto [dry_status, dry] = run_command(command + " --dry-run");
  EXPECT_EQ(dry_status, 0) << dry;
  const auto [run_status, run] = run_command(command + " " + run_flags);
  EXPECT_EQ(run_status, 0) << run;
  const double estimate = gib_after(dry, R"(tensors peak per rank \(estimate[^:]*: ([0-9.]+) GiB)");
  const double measured = gib_after(run, peak_pattern);
  EXPECT_GT(estimate, at_least) << dry;
  EXPECT_GT(measured, at_least) << run;
  EXPECT_NEAR(estimate / measured, 1.0, 0.03) << command << ": estimate " << estimate << " GiB, measured " << measured
                                               << " GiB";
  return measured;
}

}  // namespace kiln::testing
