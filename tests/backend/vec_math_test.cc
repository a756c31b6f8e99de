#include <gtest/gtest.h>

#include <cmath>

#include "kiln/backend/cpu/vec_math.h"

namespace kiln {
namespace {

TEST(VecMath, ExpMatchesFloat64WithinFewUlp) {
  double worst = 0;
  for (int i = -870000; i <= 880000; ++i) {
    const float x = float(i) * 1e-4f;
    const double want = std::exp(double(x));
    worst = std::max(worst, std::abs(ops::vec::exp(x) - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(ops::vec::exp(-100.0f), 0.0f);  // masked attention scores vanish exactly
  EXPECT_EQ(ops::vec::exp(-10000.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(ops::vec::exp(1000.0f)));
  EXPECT_EQ(ops::vec::exp(0.0f), 1.0f);
}

TEST(VecMath, ErfAndTanhMatchFloat64InAbsoluteError) {
  double erf_err = 0, tanh_err = 0;
  for (int i = -80000; i <= 80000; ++i) {
    const float x = float(i) * 1e-4f;
    erf_err = std::max(erf_err, std::abs(ops::vec::erf(x) - std::erf(double(x))));
    tanh_err = std::max(tanh_err, std::abs(ops::vec::tanh_abs(x) - std::tanh(double(x))));
  }
  EXPECT_LT(erf_err, 6e-7);
  EXPECT_LT(tanh_err, 3e-7);
  EXPECT_EQ(ops::vec::tanh_abs(100.0f), 1.0f);
  EXPECT_EQ(ops::vec::tanh_abs(-100.0f), -1.0f);
}

}  // namespace
}  // namespace kiln
