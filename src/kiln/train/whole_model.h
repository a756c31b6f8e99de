// train/whole_model.h — a model-parallel replica's parameters and optimizer state gathered into
// whole named tensors: checkpoints keep the one-process layout (io/checkpoint.h), so a checkpoint
// saved under one tensor x pipeline layout loads under any other.
#pragma once
#include <vector>

#include "kiln/dist/communicator.h"
#include "kiln/io/checkpoint.h"
#include "kiln/nn/params.h"

namespace kiln::train {

struct WholeModel {
  io::NamedTensors model;      // "<parameter>"
  io::NamedTensors optimizer;  // "<state>.<parameter>"
};

// Collective over `group`, the ranks that hold the parts of one replica (dist::ParallelGroups::
// model): rank 0 of the group receives every rank's parameters (ParamSpec parts placed into their
// whole tensors; a parameter several ranks hold whole, such as a replicated LayerNorm or the tied
// word embedding, taken from the first) and the `optimizer` buffers with the same layout, in
// order of first appearance by rank. The other ranks return an empty WholeModel.
WholeModel gather_whole_model(const ParamStore& store, const std::vector<io::FlatState>& optimizer,
                              dist::Communicator& group);

}  // namespace kiln::train
