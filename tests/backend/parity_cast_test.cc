// Parity of fill, copy and cast for every floating-point dtype pair.
#include "parity.h"

#include "kiln/core/error.h"

namespace kiln {
namespace {

using testing::Parity;

TEST(ParityCast, CastBetweenEveryFloatPairRoundsToNearest) {
  Parity p;
  for (DType from : testing::float_dtypes())
    for (DType to : testing::float_dtypes()) {
      const Tensor x = p.random({37, 19}, from, 1, 3.0f);
      Tensor y = p.zeros(x.shape, to);
      ops::cast(p.ctx, x, y);
      // The reference: the input's exact values, rounded once to the target type.
      const std::vector<double> xd = p.host(x);
      std::vector<float> want_f(xd.begin(), xd.end());
      const std::vector<double> want = p.host(p.from_host(want_f, x.shape, to));
      EXPECT_EQ(p.host(y), want) << dtype_name(from) << " -> " << dtype_name(to);
    }
}

TEST(ParityCast, FillWritesEveryElement) {
  Parity p;
  for (DType t : testing::float_dtypes()) {
    Tensor x = p.random({1000}, t, 2);
    ops::fill(p.ctx, x, 1.5f);
    EXPECT_EQ(p.host(x), std::vector<double>(1000, 1.5)) << dtype_name(t);
  }
}

TEST(ParityCast, OpsRefuseTensorsOnAnotherDevice) {
  Context cuda{Device::cuda(0)};
  Tensor x = Tensor::zeros({4});
  EXPECT_THROW(ops::fill(cuda, x, 1.0f), Error);
}

}  // namespace
}  // namespace kiln
