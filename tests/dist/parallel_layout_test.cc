// dist::ParallelLayout against Megatron's documented example: 16 ranks at TP 2, PP 4 (DP 2).
#include "kiln/dist/parallel_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "kiln/core/error.h"

namespace kiln::dist {
namespace {

using Ranks = std::vector<int>;

TEST(ParallelLayout, SixteenRanksAtTp2Pp4MakeMegatronsGroups) {
  const ParallelLayout r0 = ParallelLayout::make(16, 0, 2, 4);
  EXPECT_EQ(r0.dp, 2);
  EXPECT_EQ(r0.tp_group(), (Ranks{0, 1}));
  EXPECT_EQ(r0.dp_group(), (Ranks{0, 2}));
  EXPECT_EQ(r0.pp_group(), (Ranks{0, 4, 8, 12}));
  EXPECT_EQ(r0.embedding_group(), (Ranks{0, 12}));
  EXPECT_EQ(r0.model_group(), (Ranks{0, 1, 4, 5, 8, 9, 12, 13}));
  EXPECT_TRUE(r0.first_stage());

  const ParallelLayout r7 = ParallelLayout::make(16, 7, 2, 4);  // tp 1, dp 1, pp 1
  EXPECT_EQ(r7.tp_rank, 1);
  EXPECT_EQ(r7.dp_rank, 1);
  EXPECT_EQ(r7.pp_rank, 1);
  EXPECT_EQ(r7.tp_group(), (Ranks{6, 7}));
  EXPECT_EQ(r7.dp_group(), (Ranks{5, 7}));
  EXPECT_EQ(r7.pp_group(), (Ranks{3, 7, 11, 15}));
  EXPECT_EQ(r7.embedding_group(), (Ranks{3, 15}));
  EXPECT_FALSE(r7.first_stage() || r7.last_stage());
}

TEST(ParallelLayout, EveryRankIsInExactlyOneGroupOfEachKind) {
  for (auto [world, tp, pp] : {std::tuple{8, 2, 2}, {12, 3, 2}, {6, 1, 3}, {4, 4, 1}, {1, 1, 1}}) {
    std::set<Ranks> tp_groups, dp_groups, pp_groups;
    for (int rank = 0; rank < world; ++rank) {
      const ParallelLayout l = ParallelLayout::make(world, rank, tp, pp);
      EXPECT_EQ(l.rank_of(l.tp_rank, l.dp_rank, l.pp_rank), rank);
      for (const Ranks& g : {l.tp_group(), l.dp_group(), l.pp_group(), l.model_group()})
        EXPECT_NE(std::find(g.begin(), g.end(), rank), g.end()) << "rank " << rank;
      const Ranks e = l.embedding_group();  // the first and last stage only
      EXPECT_EQ(std::find(e.begin(), e.end(), rank) != e.end(), l.first_stage() || l.last_stage()) << "rank " << rank;
      tp_groups.insert(l.tp_group());
      dp_groups.insert(l.dp_group());
      pp_groups.insert(l.pp_group());
    }
    EXPECT_EQ(tp_groups.size(), size_t(world / tp));
    EXPECT_EQ(pp_groups.size(), size_t(world / pp));
    EXPECT_EQ(dp_groups.size(), size_t(tp * pp));
  }
}

TEST(ParallelLayout, AWorldThatDoesNotSplitNamesTheFlags) {
  try {
    ParallelLayout::make(6, 0, 2, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "6 processes do not split into --tensor-model-parallel-size 2 x "
                           "--pipeline-model-parallel-size 2: start a multiple of 4");
  }
}

}  // namespace
}  // namespace kiln::dist
