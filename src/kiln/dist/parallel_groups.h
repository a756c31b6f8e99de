// dist/parallel_groups.h — the communicators of a Megatron rank layout (dist/parallel_layout.h):
// one per group kind, each over the ranks that share every other coordinate. Made once per run,
// collectively by every rank of the world.
#pragma once
#include <memory>

#include "kiln/dist/communicator.h"
#include "kiln/dist/parallel_layout.h"

namespace kiln::dist {

struct ParallelGroups {
  ParallelLayout layout;
  std::unique_ptr<Communicator> tp;         // tensor-parallel ranks of one stage
  std::unique_ptr<Communicator> dp;         // data-parallel replicas of one (tp, pp) shard
  std::unique_ptr<Communicator> pp;         // the stages of one pipeline, first to last
  std::unique_ptr<Communicator> model;      // TP x PP ranks holding one model replica
  std::unique_ptr<Communicator> embedding;  // first and last stage (tied word embeddings)

  // Collective over `world`; throws kiln::Error when its size does not split into tp x pp.
  static ParallelGroups make(Communicator& world, int tp, int pp);
  bool model_parallel() const { return layout.tp > 1 || layout.pp > 1; }
};

}  // namespace kiln::dist
