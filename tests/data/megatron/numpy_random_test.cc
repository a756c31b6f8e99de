#include "kiln/data/megatron/numpy_random.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>

namespace {

using kiln::data::megatron::NumpyRandomState;

// Expected values printed by numpy 1.24:
//   r = np.random.RandomState(1241); [r.random() for _ in range(3)]; [r.randint(1, 5) ...];
//   [r.randint(0, 30522) ...]; l = list(range(10)); r.shuffle(l);
//   p = 1/np.arange(1, 4); p /= p.sum(); [r.choice([1, 2, 3], p=p/p.sum()) for _ in range(12)];
//   r.randint(0, 1); r.random()
TEST(NumpyRandomState, MatchesNumpyLegacyRandomState) {
  NumpyRandomState r(1234 + 7);
  EXPECT_DOUBLE_EQ(r.random(), 0.9970942822407111);
  EXPECT_DOUBLE_EQ(r.random(), 0.123214537966023);
  EXPECT_DOUBLE_EQ(r.random(), 0.12083747471497264);
  for (const int64_t want : {3, 4, 2, 1, 2, 1}) EXPECT_EQ(r.randint(1, 5), want);
  for (const int64_t want : {26424, 1648, 16719, 26051}) EXPECT_EQ(r.randint(0, 30522), want);
  std::vector<int> l(10);
  std::iota(l.begin(), l.end(), 0);
  r.shuffle(l);
  EXPECT_EQ(l, (std::vector<int>{9, 0, 8, 3, 5, 6, 2, 7, 1, 4}));
  std::array<double, 3> p{1.0, 0.5, 1.0 / 3.0};
  double sum = p[0] + p[1] + p[2];
  for (double& x : p) x /= sum;
  const std::array<double, 3> cdf{p[0], p[0] + p[1], 1.0};
  for (const size_t want : {2, 3, 3, 3, 1, 3, 1, 1, 1, 3, 1, 2}) EXPECT_EQ(r.choice(cdf) + 1, want);
  EXPECT_EQ(r.randint(0, 1), 0);  // draws nothing
  EXPECT_DOUBLE_EQ(r.random(), 0.7569067206978012);
  NumpyRandomState wrapped(uint32_t((uint64_t(1) << 32) + 5));
  EXPECT_DOUBLE_EQ(wrapped.random(), 0.22199317108973948);
}

}  // namespace
