#include "kiln/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include "kiln/core/error.h"

namespace kiln::optim {
namespace {

TEST(PolyWarmupSchedule, TinygradDefaultsOneWarmupStepPowerOne) {
  // W = 1, T = 100, lr0 = 2e-3: step 0 -> 0, step 1 -> lr0, step k >= 2 -> lr0·(1-(k-1)/100).
  const PolyWarmupSchedule s(2e-3, 1, 100);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(1), 2e-3);
  EXPECT_DOUBLE_EQ(s.lr(2), 2e-3 * 0.99);
  EXPECT_DOUBLE_EQ(s.lr(51), 2e-3 * 0.5);
  EXPECT_NEAR(s.lr(100), 2e-3 * 0.01, 1e-17);
  EXPECT_DOUBLE_EQ(s.lr(101), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(500), 0.0);  // held at end_lr past the schedule
}

TEST(PolyWarmupSchedule, LinearWarmupThenDecay) {
  // W = 3, T = 10: warmup c/3·0.3, then 0.3·(1-(c-3)/8).
  const PolyWarmupSchedule s(0.3, 3, 10);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(3), 0.3);
  EXPECT_DOUBLE_EQ(s.lr(4), 0.3 * 7 / 8);
  EXPECT_DOUBLE_EQ(s.lr(10), 0.3 * 1 / 8);
}

TEST(PolyWarmupSchedule, NoWarmupStartsAtBaseLr) {
  // W = 0, T = 1141 (the 5.0.0 skeleton): lr(0) = lr0, lr(c) = lr0·(1-c/1142).
  const PolyWarmupSchedule s(0.002, 0, 1141);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.002);
  EXPECT_DOUBLE_EQ(s.lr(571), 0.002 * (1 - 571.0 / 1142));
}

TEST(PolyWarmupSchedule, PowerTwoWithEndLrAndClippedWarmup) {
  // ResNet-style power 2, end 1e-4; W = 4, T = 20: lr(12) = (10-1e-4)·(1-8/17)² + 1e-4.
  const PolyWarmupSchedule s(10.0, 4, 20, 2.0, 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(2), 5.0);
  EXPECT_NEAR(s.lr(12), (10.0 - 1e-4) * (9.0 / 17) * (9.0 / 17) + 1e-4, 1e-12);
  // Warmup longer than training is clipped to T: W = T = 10, lr(5) = lr0/2.
  const PolyWarmupSchedule clipped(1.0, 20, 10);
  EXPECT_DOUBLE_EQ(clipped.lr(5), 0.5);
  EXPECT_DOUBLE_EQ(clipped.lr(10), 1.0);
  EXPECT_THROW(PolyWarmupSchedule(1.0, 0, 0), Error);
}

TEST(WarmupDecaySchedule, MegatronLinearInSamples) {
  // Megatron 340M example: max 1e-4, min 1e-5, 9,900 warmup of 990,000 decay iterations; counted in
  // samples with GBS 512.
  const int64_t gbs = 512;
  const LinearWarmupDecaySchedule s(1e-4, 1e-5, 9900 * gbs, 990000 * gbs);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(4950 * gbs), 5e-5);
  EXPECT_DOUBLE_EQ(s.lr(9900 * gbs), 1e-4);
  EXPECT_NEAR(s.lr(499950 * gbs), 5.5e-5, 1e-18);  // halfway through the decay
  EXPECT_NEAR(s.lr(990000 * gbs), 1e-5, 1e-18);
  EXPECT_DOUBLE_EQ(s.lr(990001 * gbs), 1e-5);
  EXPECT_DOUBLE_EQ(s.lr(1000000 * gbs), 1e-5);
}

TEST(WarmupDecaySchedule, CosineDecay) {
  // warmup 100, decay 1100: r = (n-100)/1000; lr = 1e-5 + 9e-5·(cos(πr)+1)/2.
  const CosineWarmupDecaySchedule s(1e-4, 1e-5, 100, 1100);
  EXPECT_DOUBLE_EQ(s.lr(50), 5e-5);
  EXPECT_DOUBLE_EQ(s.lr(100), 1e-4);
  EXPECT_NEAR(s.lr(350), 1e-5 + 9e-5 * 0.8535533905932737, 1e-18);  // r = 0.25
  EXPECT_NEAR(s.lr(600), 5.5e-5, 1e-18);
  EXPECT_NEAR(s.lr(850), 1e-5 + 9e-5 * 0.14644660940672624, 1e-18);  // r = 0.75
  EXPECT_NEAR(s.lr(1100), 1e-5, 1e-18);
  EXPECT_DOUBLE_EQ(s.lr(5000), 1e-5);
}

TEST(WarmupDecaySchedule, NoWarmupAndBadArguments) {
  const LinearWarmupDecaySchedule s(1.0, 0.0, 0, 10);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(4), 0.6);
  EXPECT_THROW(LinearWarmupDecaySchedule(1.0, 0.0, 20, 10), Error);
  EXPECT_THROW(LinearWarmupDecaySchedule(1.0, 2.0, 0, 10), Error);
}

}  // namespace
}  // namespace kiln::optim
