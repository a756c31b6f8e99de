// The loss scaler's state machine against Megatron's DynamicGradScaler rules
// (specs/megatron-bert.md 4.3) and the static / no-scaler cases.
#include "kiln/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include "kiln/core/error.h"

namespace kiln::optim {
namespace {

LossScalerConfig dynamic(double initial, double min_scale, int64_t window, int64_t hysteresis) {
  LossScalerConfig c;
  c.kind = LossScalerConfig::Kind::dynamic;
  c.scale = initial;
  c.min_scale = min_scale;
  c.window = window;
  c.hysteresis = hysteresis;
  return c;
}

TEST(LossScaler, MegatronDefaultsStartAtTwoToThe32) {
  const LossScaler s(dynamic(4294967296.0, 1.0, 1000, 2));
  EXPECT_EQ(s.scale(), 4294967296.0);
  EXPECT_TRUE(s.dynamic());
  EXPECT_TRUE(s.can_lower());
}

TEST(LossScaler, HysteresisSpendsOverflowsBeforeHalving) {
  LossScaler s(dynamic(1024, 1, 1000, 2));
  s.update(true);  // hysteresis 2 -> 1: scale kept
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);  // 1 -> 0: halve
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // stays <= 0: every further overflow halves
  EXPECT_EQ(s.scale(), 256);
  s.update(false);  // a clean step does not restore the hysteresis
  s.update(true);
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScaler, CleanWindowDoublesAndRestoresHysteresis) {
  LossScaler s(dynamic(64, 1, 3, 2));
  s.update(true);  // hysteresis 2 -> 1, growth tracker 0
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 64);
  s.update(false);  // third clean step: x2, hysteresis back to 2
  EXPECT_EQ(s.scale(), 128);
  s.update(true);  // 2 -> 1: kept
  EXPECT_EQ(s.scale(), 128);
  s.update(true);  // 1 -> 0: halved
  EXPECT_EQ(s.scale(), 64);
}

TEST(LossScaler, OverflowResetsTheGrowthTracker) {
  LossScaler s(dynamic(8, 1, 3, 5));
  s.update(false);
  s.update(false);
  s.update(true);  // growth tracker back to 0 (hysteresis still > 0: scale kept)
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 8);
  s.update(false);
  EXPECT_EQ(s.scale(), 16);
}

TEST(LossScaler, NeverGoesBelowTheMinimum) {
  LossScaler s(dynamic(4, 2, 1000, 1));
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
  EXPECT_FALSE(s.can_lower());
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
}

TEST(LossScaler, StaticAndNoneNeverChange) {
  LossScalerConfig c;
  c.kind = LossScalerConfig::Kind::constant;
  c.scale = 2048;
  LossScaler fixed(c);
  for (int i = 0; i < 5; ++i) fixed.update(i % 2 == 0);
  EXPECT_EQ(fixed.scale(), 2048);
  EXPECT_TRUE(fixed.enabled());
  EXPECT_FALSE(fixed.can_lower());
  LossScaler none;
  none.update(true);
  EXPECT_EQ(none.scale(), 1);
  EXPECT_FALSE(none.enabled());
}

TEST(LossScaler, StateRoundTripsThroughACheckpoint) {
  LossScaler a(dynamic(1024, 1, 4, 2));
  a.update(true);
  a.update(true);
  a.update(false);
  LossScaler b(dynamic(1024, 1, 4, 2));
  b.load_state(a.state());
  EXPECT_EQ(b.state(), a.state());
  // The same future: three more clean steps double both.
  for (int i = 0; i < 3; ++i) {
    a.update(false);
    b.update(false);
  }
  EXPECT_EQ(a.scale(), 1024);
  EXPECT_EQ(b.scale(), 1024);
  EXPECT_THROW(b.load_state(nlohmann::json{{"scale", "x"}}), Error);
}

TEST(LossScaler, BadSettingsAreErrors) {
  EXPECT_THROW(LossScaler(dynamic(0, 1, 10, 2)), Error);
  EXPECT_THROW(LossScaler(dynamic(8, 16, 10, 2)), Error);
  EXPECT_THROW(LossScaler(dynamic(8, 1, 0, 2)), Error);
  EXPECT_THROW(LossScaler(dynamic(8, 1, 10, 0)), Error);
}

}  // namespace
}  // namespace kiln::optim
