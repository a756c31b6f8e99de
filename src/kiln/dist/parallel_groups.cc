#include "kiln/dist/parallel_groups.h"

#include <algorithm>

namespace kiln::dist {

ParallelGroups ParallelGroups::make(Communicator& world, int tp, int pp) {
  ParallelGroups g;
  g.layout = ParallelLayout::make(world.size(), world.rank(), tp, pp);
  g.tp = subgroup(world, g.layout.tp_group());
  g.dp = subgroup(world, g.layout.dp_group());
  g.pp = subgroup(world, g.layout.pp_group());
  g.model = subgroup(world, g.layout.model_group());
  // Ranks outside every embedding group (middle stages) form their own, unused one.
  const std::vector<int> embedding = g.layout.embedding_group();
  const bool member = std::find(embedding.begin(), embedding.end(), world.rank()) != embedding.end();
  g.embedding = member ? subgroup(world, embedding) : world.split(world.size() + world.rank(), 0);
  return g;
}

}  // namespace kiln::dist
