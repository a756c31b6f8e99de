// `kiln train bert --dry-run` estimates the peak of the tensors a run holds; the run's console
// line reports the measured peak ("tensors X GiB (peak Y)"). For bert-tiny at sequence 512 (the
// attention core and the MLM logits large against the weights) in f32 and bf16, post- and pre-LN,
// with and without recomputation, the two agree within 3% (they agreed to 0.01 GiB of about
// 0.7 GiB when this was written, 2026-12-01). Label `integration`.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {

double gib_after(const std::string& output, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

TEST(MemoryEstimate, DryRunPredictsTheMeasuredTensorsPeak) {
  const std::string dir = testing::unique_temp_dir("memory_estimate").string();
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --fake-data --seq-length 512 --max-predictions 76 "
                            "--global-batch-size 16 --output-dir " + dir + " ";
  for (const std::string flags : {"", "--bf16", "--pre-ln", "--pre-ln --bf16 --recompute-activations"}) {
    const auto [dry_status, dry] = testing::run_command(train + flags + " --dry-run");
    ASSERT_EQ(dry_status, 0) << dry;
    const double estimate = gib_after(dry, R"(tensors peak per rank \(estimate[^:]*: ([0-9.]+) GiB)");
    const auto [run_status, run] =
        testing::run_command(train + flags + " --benchmark 1 --log-interval 1 --eval-iters 1 --eval-batch-size 16");
    ASSERT_EQ(run_status, 0) << run;
    const double measured = gib_after(run, R"(tensors [0-9.]+ GiB \(peak ([0-9.]+)\))");
    ASSERT_GT(estimate, 0.3) << dry;
    ASSERT_GT(measured, 0.3) << run;
    EXPECT_NEAR(estimate / measured, 1.0, 0.03) << "'" << flags << "': estimate " << estimate << " GiB, measured "
                                                 << measured << " GiB";
  }
}

}  // namespace
}  // namespace kiln
