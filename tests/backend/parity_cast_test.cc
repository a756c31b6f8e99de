// Parity of fill, copy and cast for every floating-point dtype pair.
#include "parity.h"

#include <algorithm>

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

// Batches copied in through one staging while the device still has ops queued (on a GPU the host
// does not wait for them): each copy lands behind the ops before it and ahead of those after it,
// the host may overwrite its source as soon as the call returns, and a larger batch grows the
// staging.
TEST(ParityCast, StagedCopiesLandInStreamOrder) {
  Parity p;
  ops::HostStaging staging;
  const int64_t n = 1 << 16;
  Tensor batch = Tensor::empty({2 * n}, DType::f32, p.ctx.device), sum = p.zeros({2 * n}, DType::f32);
  std::vector<float> host(size_t(2 * n));
  std::vector<double> want(size_t(2 * n), 0.0);
  for (int round = 0; round < 4; ++round) {
    const int64_t rows = round < 2 ? n : 2 * n;
    for (int64_t i = 0; i < rows; ++i) host[size_t(i)] = float(round * 7 + i % 5);
    Tensor part = batch.slice_rows(0, rows), part_sum = sum.slice_rows(0, rows);
    ops::staged_copy(p.ctx, Tensor::view(host.data(), {rows}), part, staging);
    std::fill(host.begin(), host.end(), -1.0f);  // the source is free again
    ops::add(p.ctx, part_sum, part, part_sum);
    ops::scale(p.ctx, part, 0.0f, part);  // queued before the next copy into it
    for (int64_t i = 0; i < rows; ++i) want[size_t(i)] += double(round * 7 + i % 5);
  }
  EXPECT_EQ(p.host(sum), want);
}

TEST(ParityCast, OpsRefuseTensorsOnAnotherDevice) {
  Context cuda{Device::cuda(0)};
  Tensor x = Tensor::zeros({4});
  EXPECT_THROW(ops::fill(cuda, x, 1.0f), Error);
}

}  // namespace
}  // namespace kiln
