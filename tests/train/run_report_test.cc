// BENCHMARK's closing estimate: the median step time leaves the warm-up steps out.
#include <gtest/gtest.h>

#include "kiln/train/run_report.h"

namespace kiln::train {
namespace {

TEST(RunReport, EstimateIsTheMedianAfterTheWarmUpSteps) {
  // Two slow warm-up steps would move the median of all seven from 4 to 5 ms.
  const std::string text = estimated_training_time({0.9, 0.8, 0.003, 0.005, 0.004, 0.002, 0.006}, 1000);
  EXPECT_NE(text.find("1000 steps at a median 4.0 ms/step"), std::string::npos) << text;
  EXPECT_NE(text.find("Estimated training time: 0h0m"), std::string::npos) << text;
}

TEST(RunReport, EstimateUsesEveryStepWhenThereAreNoMoreThanTheWarmUp) {
  const std::string text = estimated_training_time({0.010, 0.030}, 3600);
  EXPECT_NE(text.find("at a median 30.0 ms/step"), std::string::npos) << text;
  EXPECT_NE(text.find("Estimated training time: 0h1m"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::train
