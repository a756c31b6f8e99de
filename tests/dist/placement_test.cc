// dist::rank_cores: the ranks of one machine get disjoint contiguous slices covering every core.
#include "kiln/dist/placement.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kiln/core/error.h"

namespace kiln::dist {
namespace {

std::vector<int> iota(int n, int first = 0) {
  std::vector<int> v(size_t(n), 0);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(RankCores, SlicesAreDisjointContiguousAndCoverEveryCore) {
  for (int cores : {1, 2, 7, 16, 64})
    for (int ranks = 1; ranks <= cores; ++ranks) {
      std::vector<int> covered;
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int> slice = rank_cores(iota(cores, 100), r, ranks);
        ASSERT_FALSE(slice.empty());
        EXPECT_LE(slice.size(), size_t(cores / ranks + 1));
        EXPECT_GE(slice.size(), size_t(cores / ranks));
        covered.insert(covered.end(), slice.begin(), slice.end());
      }
      EXPECT_EQ(covered, iota(cores, 100)) << cores << " cores, " << ranks << " ranks";
    }
}

TEST(RankCores, FewerCoresThanRanksShareOneCoreEachInTurn) {
  EXPECT_EQ(rank_cores({4, 5}, 0, 3), std::vector<int>{4});
  EXPECT_EQ(rank_cores({4, 5}, 1, 3), std::vector<int>{5});
  EXPECT_EQ(rank_cores({4, 5}, 2, 3), std::vector<int>{4});
}

TEST(RankCores, AnImpossibleRankIsAnError) {
  EXPECT_THROW(rank_cores({0, 1}, 2, 2), Error);
  EXPECT_THROW(rank_cores({}, 0, 1), Error);
}

}  // namespace
}  // namespace kiln::dist
