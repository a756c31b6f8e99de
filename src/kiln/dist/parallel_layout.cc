#include "kiln/dist/parallel_layout.h"

#include "kiln/core/error.h"

namespace kiln::dist {

ParallelLayout ParallelLayout::make(int world, int rank, int tp, int pp) {
  KILN_CHECK(tp >= 1 && pp >= 1, "--tensor-model-parallel-size {} and --pipeline-model-parallel-size {} must be >= 1",
             tp, pp);
  KILN_CHECK(world % (tp * pp) == 0,
             "{} processes do not split into --tensor-model-parallel-size {} x --pipeline-model-parallel-size {}: "
             "start a multiple of {}",
             world, tp, pp, tp * pp);
  KILN_CHECK(rank >= 0 && rank < world, "rank {} outside a world of {}", rank, world);
  ParallelLayout l;
  l.world = world, l.tp = tp, l.pp = pp, l.dp = world / (tp * pp);
  l.rank = rank;
  l.tp_rank = rank % tp;
  l.dp_rank = rank / tp % l.dp;
  l.pp_rank = rank / (tp * l.dp);
  return l;
}

std::vector<int> ParallelLayout::tp_group() const {
  std::vector<int> g;
  for (int t = 0; t < tp; ++t) g.push_back(rank_of(t, dp_rank, pp_rank));
  return g;
}

std::vector<int> ParallelLayout::dp_group() const {
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(rank_of(tp_rank, d, pp_rank));
  return g;
}

std::vector<int> ParallelLayout::pp_group() const {
  std::vector<int> g;
  for (int p = 0; p < pp; ++p) g.push_back(rank_of(tp_rank, dp_rank, p));
  return g;
}

std::vector<int> ParallelLayout::model_group() const {
  std::vector<int> g;
  for (int p = 0; p < pp; ++p)
    for (int t = 0; t < tp; ++t) g.push_back(rank_of(t, dp_rank, p));
  return g;
}

std::vector<int> ParallelLayout::embedding_group() const {
  const std::vector<int> stages = pp_group();
  if (pp == 1) return stages;
  return {stages.front(), stages.back()};
}

}  // namespace kiln::dist
